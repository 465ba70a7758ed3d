"""The rollout engine: a policy interface, a chat formatter, `run_episode` and the collector."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import dataclasses
import hashlib
import logging
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from gem_core.core import Env
from gem_core.errors import Error, InvalidArgument
from gem_core.rl.types import LAYOUTS, Episode, Turn

__all__ = [
    "PolicyError",
    "ContextLengthExceeded",
    "SamplingParams",
    "GenerationResult",
    "Policy",
    "ChatResult",
    "ChatPolicy",
    "ChatFormatter",
    "chat_messages",
    "chat_content",
    "image_data_url",
    "TemplateRewriteWarning",
    "TRUNCATED_RESPONSE_POLICIES",
    "derive_seed",
    "run_episode",
    "run_chat_episode",
    "collect_episodes",
    "collect_episodes_sync",
]

logger = logging.getLogger(__name__)

TRUNCATED_RESPONSE_POLICIES = ("pass", "penalize")
FINISH_REASONS = ("stop", "length")


class PolicyError(Error, RuntimeError):
    """A policy backend failed: transport error, timeout, or a malformed response.

    `run_episode` turns it (and any other exception from ``policy.generate``) into a
    flagged episode (``episode.error``); the other episodes go on.
    """


class ContextLengthExceeded(PolicyError):
    """The server refused a request because prompt plus ``max_tokens`` exceed its context.

    `run_chat_episode` ends the episode with ``end_reason="context"`` (a budget, not an
    error); `run_episode`, which checks the context itself, flags it like any `PolicyError`.
    """


class TemplateRewriteWarning(RuntimeWarning):
    """A chat template rendered earlier turns differently once a message was added."""


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How to sample one response.

    Attributes:
        temperature: ``0`` for greedy decoding; otherwise logits are divided by it.
        top_p: nucleus sampling mass (``1.0``: off).
        max_new_tokens: the most tokens one response may have.
        seed: per-request sampling seed (``None``: unseeded). `run_episode` derives a
            distinct seed per turn from it (`derive_seed`), and the collector one per
            episode, so results do not depend on scheduling.
        stop_token_ids: extra token ids that end a response (besides the model's EOS).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise InvalidArgument(f"temperature must be >= 0, got {self.temperature!r}")
        if not (0 < self.top_p <= 1):
            raise InvalidArgument(f"top_p must be in (0, 1], got {self.top_p!r}")
        if (
            isinstance(self.max_new_tokens, bool)
            or not isinstance(self.max_new_tokens, int)
            or self.max_new_tokens < 1
        ):
            raise InvalidArgument(
                f"max_new_tokens must be a positive int, got {self.max_new_tokens!r}"
            )
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0
        ):
            raise InvalidArgument(f"seed must be a non-negative int or None, got {self.seed!r}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))

    @property
    def greedy(self) -> bool:
        """Whether decoding is greedy (``temperature == 0``)."""
        return self.temperature == 0

    def replace(self, **changes: Any) -> SamplingParams:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class GenerationResult:
    """One generated response.

    Attributes:
        token_ids: the generated ids, including the stop token when one was emitted.
        logprobs: log-probability of each generated token (same length as
            ``token_ids``) under the model's distribution at temperature 1.
        finish_reason: ``"stop"`` (a stop token or EOS) or ``"length"``
            (``max_new_tokens`` reached without one).
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


@runtime_checkable
class Policy(Protocol):
    """What the rollout engine needs from a model: one async call per response."""

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerationResult:
        """Generate a response to ``prompt_ids``."""
        ...


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One response of a chat (text-level) backend.

    Attributes:
        text: the assistant message's text (``""`` for an empty completion).
        finish_reason: ``"stop"`` (the model ended its message) or ``"length"`` (the
            token limit was reached).
        prompt_tokens: prompt tokens the server counted (its ``usage``), or ``None``
            when it did not say.
        completion_tokens: generated tokens the server counted, or ``None``.
    """

    text: str
    finish_reason: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@runtime_checkable
class ChatPolicy(Protocol):
    """A text-level model for `run_chat_episode`: chat messages in, the reply's text out."""

    async def chat(self, messages: list[dict[str, Any]], sampling: SamplingParams) -> ChatResult:
        """Answer the conversation ``messages`` (``role``/``content`` dicts; a ``content`` is
        a string, or a list of OpenAI content parts when the observation had images)."""
        ...


#: Leading bytes of the encoded image formats `image_data_url` sends as they are.
_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _image_mime(data: bytes) -> str | None:
    for signature, mime in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _encode_image(image: Any) -> tuple[str, dict[str, Any]]:
    """``(data URL, summary)`` of one observation image (see `image_data_url`)."""
    if type(image).__module__.startswith("PIL.") and hasattr(image, "save"):
        import io

        buf = io.BytesIO()
        try:
            image.save(buf, format="PNG")
        except Exception as exc:
            raise InvalidArgument(
                f"cannot encode a PIL image (mode {getattr(image, 'mode', '?')!r}) as PNG: "
                f"{type(exc).__name__}: {exc}; convert it first (e.g. image.convert('RGB'))"
            ) from None
        image = buf.getvalue()
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        mime = _image_mime(data)
        if mime is None:
            raise InvalidArgument(
                f"observation image of {len(data)} bytes starting {data[:8]!r} is not PNG, JPEG, "
                "GIF or WebP data; return encoded image bytes (e.g. the PNG file's bytes) or a "
                "PIL image from the env"
            )
        summary: dict[str, Any] = {"mime": mime, "bytes": len(data), "width": None, "height": None}
        if mime == "image/png" and len(data) >= 24 and data[12:16] == b"IHDR":
            summary["width"] = int.from_bytes(data[16:20], "big")
            summary["height"] = int.from_bytes(data[20:24], "big")
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", summary
    if isinstance(image, str) and image.startswith("data:image/") and ";base64," in image:
        head, _, payload = image.partition(",")
        return image, {
            "mime": head[len("data:") :].split(";")[0],
            "bytes": len(payload) * 3 // 4 - payload[-2:].count("="),
            "width": None,
            "height": None,
        }
    raise InvalidArgument(
        f"cannot send an observation image of type {type(image).__name__} to a chat model: "
        "expected encoded image bytes (PNG, JPEG, GIF, WebP), a PIL.Image.Image or a "
        "'data:image/...;base64,' URL (for MathVisualEnv pass image_format='png' or 'pil')"
    )


def image_data_url(image: Any) -> str:
    """The ``data:`` URL of one observation image, for an ``image_url`` content part.

    Encoded bytes are sent as they are, with the MIME type their signature names
    (PNG, JPEG, GIF or WebP); a ``PIL.Image.Image`` is encoded to PNG; a
    ``data:image/...;base64,`` URL passes through.

    Raises:
        InvalidArgument: any other type (a path, an array), or bytes of another format.
    """
    return _encode_image(image)[0]


def _content_and_images(
    observation: Any,
) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]]]:
    """``(message content, one summary per image)`` of an observation."""
    if isinstance(observation, list):  # content parts, already built
        return observation, []
    if not isinstance(observation, Mapping):
        return _observation_text(observation), []
    text = _observation_text(observation)
    images = observation.get("images")
    if images is None or (isinstance(images, (list, tuple)) and not images):
        return text, []
    if not isinstance(images, (list, tuple)):
        images = [images]
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    summaries = []
    for image in images:
        url, summary = _encode_image(image)
        parts.append({"type": "image_url", "image_url": {"url": url}})
        summaries.append(summary)
    return parts, summaries


def chat_content(observation: Any) -> str | list[dict[str, Any]]:
    """The ``content`` of the ``user`` message for one observation.

    A text observation (a ``str``, or a dict whose ``images`` are absent or empty) is
    its text, as a plain string. A dict ``{"text": str, "images": [...]}`` with images
    becomes OpenAI-style content parts: ``{"type": "text", "text": ...}`` then one
    ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` per
    image, in order (see `image_data_url` for the image types accepted). A list is
    taken as content parts already built and returned as it is.

    Raises:
        InvalidArgument: an image of a type `image_data_url` cannot send.
    """
    return _content_and_images(observation)[0]


def chat_messages(
    observations: Sequence[Any], responses: Sequence[str], *, system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """The chat of an episode: optional system message, then alternating user/assistant messages.

    Each observation is a ``user`` message (its content is `chat_content` of it: the
    text, or content parts when it carries images) and each response an ``assistant``
    message; ``responses`` has as many entries as ``observations``, or one fewer (the
    chat then ends with a user message, ready for the next response).
    """
    if not (len(responses) == len(observations) or len(responses) == len(observations) - 1):
        raise InvalidArgument(
            f"need as many responses as observations (or one fewer), got "
            f"{len(responses)} and {len(observations)}"
        )
    msgs: list[dict[str, Any]] = []
    if system_prompt is not None:
        msgs.append({"role": "system", "content": system_prompt})
    for i, obs in enumerate(observations):
        msgs.append({"role": "user", "content": obs if isinstance(obs, str) else chat_content(obs)})
        if i < len(responses):
            msgs.append({"role": "assistant", "content": responses[i]})
    return msgs


def derive_seed(base: int | None, *keys: object) -> int | None:
    """A deterministic 63-bit seed from ``base`` and ``keys`` (``None`` stays ``None``)."""
    if base is None:
        return None
    digest = hashlib.blake2b(repr((base, *keys)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class ChatFormatter:
    """Turns observations and responses into token ids with the tokenizer's chat template.

    Each observation becomes a ``user`` message and each response an ``assistant``
    message (preceded by an optional ``system`` message). Rendering uses
    ``tokenizer.apply_chat_template(..., tokenize=False)``; text is tokenized with
    ``add_special_tokens=False`` (the template itself writes any BOS).

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        system_prompt: text of a leading ``system`` message, or ``None``.
        max_context: the longest sequence (prompt plus ``max_new_tokens``) a turn may
            need; a turn that would exceed it ends the episode (``end_reason="context"``).
        chat_template: a template overriding the tokenizer's.
        stop_token_ids: ids that end a response; default the tokenizer's EOS id.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        system_prompt: str | None = None,
        max_context: int = 4096,
        chat_template: str | None = None,
        stop_token_ids: Sequence[int] | None = None,
    ):
        if isinstance(max_context, bool) or not isinstance(max_context, int) or max_context < 2:
            raise InvalidArgument(f"max_context must be an int >= 2, got {max_context!r}")
        if chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise InvalidArgument(
                f"{type(tokenizer).__name__} has no chat template; pass chat_template=... "
                "(e.g. gem_core.rl.testing.CHATML_TEMPLATE)"
            )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.max_context = max_context
        self.chat_template = chat_template
        if stop_token_ids is None:
            eos = getattr(tokenizer, "eos_token_id", None)
            stop_token_ids = [] if eos is None else [eos]
        self.stop_token_ids: tuple[int, ...] = tuple(int(t) for t in stop_token_ids)

    def messages(
        self, observations: Sequence[str], responses: Sequence[str]
    ) -> list[dict[str, str]]:
        """The chat: optional system message, then alternating user/assistant messages."""
        return chat_messages(observations, responses, system_prompt=self.system_prompt)

    def render(self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages``."""
        kwargs: dict[str, Any] = {}
        if self.chat_template is not None:
            kwargs["chat_template"] = self.chat_template
        return self.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token text such as ``<|im_start|>`` included)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids``."""
        return self.tokenizer.decode(
            list(ids), skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False
        )


class _Conversation:
    """The token state of one episode under a layout (see `Turn` for the layouts)."""

    def __init__(self, formatter: ChatFormatter, layout: str):
        self.f = formatter
        self.layout = layout
        self.observations: list[str] = []
        self.contents: list[str] = []
        self.prompt: list[int] = []  # what the policy conditions on for the next response
        self.text = ""  # packed: the rendered text ``self.prompt`` stands for
        self.encoded = 0
        self.rewrite_reason: str | None = None

    def _encode(self, text: str) -> list[int]:
        ids = self.f.encode(text)
        self.encoded += len(ids)
        return ids

    def add_observation(self, observation: str) -> tuple[list[int], bool]:
        """Append an observation; return ``(prompt_ids of the turn, starts_sample)``."""
        first = not self.observations
        self.observations.append(observation)
        new_text = self.f.render(
            self.f.messages(self.observations, self.contents), add_generation_prompt=True
        )
        self.rewrite_reason = None
        if self.layout == "packed" and not first:
            history = self.f.render(
                self.f.messages(self.observations[:-1], self.contents), add_generation_prompt=False
            )
            if not history.startswith(self.text):
                self.rewrite_reason = (
                    "the template does not render the generated response verbatim (e.g. it "
                    "strips whitespace or ends the turn with a different token than the "
                    "model's stop token)"
                )
            elif not new_text.startswith(history):
                self.rewrite_reason = (
                    "the template rewrites earlier turns when a message is added (e.g. it "
                    "strips earlier <think> reasoning)"
                )
            else:
                delta = self._encode(new_text[len(self.text) :])
                self.prompt.extend(delta)
                self.text = new_text
                return delta, False
        ids = self._encode(new_text)
        self.prompt = list(ids)
        self.text = new_text
        return ids, True

    def add_response(self, token_ids: list[int]) -> tuple[str, str]:
        """Append a response; return ``(chat content, action text)``."""
        stopped = bool(token_ids) and token_ids[-1] in self.f.stop_token_ids
        body = token_ids[:-1] if stopped else token_ids
        content = self.f.decode(body, skip_special_tokens=False)
        action = self.f.decode(body, skip_special_tokens=True)
        self.contents.append(content)
        self.prompt.extend(token_ids)
        self.text += content + (self.f.decode(token_ids[-1:]) if stopped else "")
        return content, action


def _fail(episode: Episode, where: str, exc: BaseException) -> None:
    """End ``episode`` flagged with the error raised in ``where``; the other episodes go on."""
    episode.error = f"{where}: {type(exc).__name__}: {exc}"
    episode.end_reason = "error"
    logger.warning(
        "episode %s (seed %s) failed in %s: %s", episode.env_id, episode.seed, where, exc
    )


def _observation_text(obs: Any) -> str:
    if isinstance(obs, str):
        return obs
    if isinstance(obs, Mapping) and isinstance(obs.get("text"), str):
        return obs["text"]
    return str(obs)


def _check_result(result: Any) -> GenerationResult:
    if not isinstance(result, GenerationResult):
        raise PolicyError(
            f"policy.generate must return a GenerationResult, got {type(result).__name__}"
        )
    ids, lps = result.token_ids, result.logprobs
    if not isinstance(ids, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids
    ):
        raise PolicyError(
            f"malformed GenerationResult: token_ids must be a list of non-negative ints, got {ids!r:.200}"
        )
    if not isinstance(lps, list) or len(lps) != len(ids):
        got = len(lps) if isinstance(lps, list) else type(lps).__name__
        raise PolicyError(
            f"malformed GenerationResult: need {len(ids)} logprobs (one per token), got {got}"
        )
    if result.finish_reason not in FINISH_REASONS:
        raise PolicyError(
            f"malformed GenerationResult: finish_reason must be one of {FINISH_REASONS}, "
            f"got {result.finish_reason!r}"
        )
    return result


async def _call(
    executor: concurrent.futures.Executor | None, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, lambda: fn(*args, **kwargs))


def _check_max_turns(max_turns: int | None) -> None:
    if max_turns is not None and (
        isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
    ):
        raise InvalidArgument(f"max_turns must be a positive int or None, got {max_turns!r}")


def _record_step(episode: Episode, turn: Turn, step: tuple[Any, ...]) -> tuple[str, bool]:
    """Record an ``env.step`` result on ``turn``/``episode``: ``(observation text, episode over)``."""
    obs, reward, terminated, env_truncated, info = step
    turn.reward = float(reward)
    turn.info = dict(info) if isinstance(info, Mapping) else {}
    turn.format_error = bool(turn.info.get("format_error", False))
    episode.success = bool(turn.info.get("success", False))
    if terminated:
        episode.end_reason = "terminated"
    elif env_truncated:
        episode.end_reason = "env_truncated"
    return _observation_text(obs), bool(terminated or env_truncated)


def _check_options(layout: str, truncated_response: str) -> None:
    if layout not in LAYOUTS:
        raise InvalidArgument(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if truncated_response not in TRUNCATED_RESPONSE_POLICIES:
        raise InvalidArgument(
            f"truncated_response must be one of {TRUNCATED_RESPONSE_POLICIES}, got {truncated_response!r}"
        )


async def run_episode(
    env: Env,
    policy: Policy,
    formatter: ChatFormatter,
    *,
    seed: int | None = None,
    max_turns: int | None = None,
    sampling: SamplingParams | None = None,
    layout: str = "packed",
    truncated_response: str = "pass",
    truncation_reward: float = -1.0,
    generation_timeout: float | None = None,
    env_id: str | None = None,
    reset_options: dict[str, Any] | None = None,
    executor: concurrent.futures.Executor | None = None,
) -> Episode:
    """Play one episode of ``env`` with ``policy``; never raises for policy or env errors.

    Each turn: the observation is formatted (see the layouts in `Turn`), the policy
    generates a response, the response (decoded, special tokens skipped) goes to
    ``env.step``. ``env.reset`` and ``env.step`` run in ``executor`` (the loop's default
    thread pool when ``None``), so other episodes keep generating meanwhile.

    Packed layout: the generated ids are appended exactly as generated; each new
    observation is appended as the token delta between the text so far and the chat
    template's rendering of the chat with the new user message and the generation
    prompt. When the template does not reproduce the text so far (it rewrites earlier
    turns, or does not render the response verbatim) the episode is flagged
    (``template_rewrite``), a `TemplateRewriteWarning` is issued, and the turn starts a
    new sample from the full rendering (the per-turn behaviour) — the policy is always
    prompted with exactly the tokens stored in the sample.

    Ends (``episode.end_reason``): the env terminates or truncates; ``max_turns``
    turns were played; the next prompt plus ``sampling.max_new_tokens`` exceeds
    ``formatter.max_context`` (``"context"``: the turn is not played); a truncated
    response under ``truncated_response="penalize"``; or an error.

    Args:
        env: the env (not closed here).
        policy: the model.
        formatter: the chat formatter.
        seed: passed to ``env.reset``.
        max_turns: the engine's turn limit (``None``: the env's own limits only).
        sampling: sampling parameters (default `SamplingParams()`); with a seed, turn
            ``t`` uses ``derive_seed(sampling.seed, t)``.
        layout: ``"packed"`` or ``"per_turn"``.
        truncated_response: what to do with a response that hit ``max_new_tokens``
            without a stop token (always flagged ``response_truncated``): ``"pass"`` it
            to the env as it is, or ``"penalize"``: do not step the env, give the turn
            ``truncation_reward`` and end the episode.
        truncation_reward: the reward of a penalized truncated response.
        generation_timeout: seconds one ``generate`` call may take (``None``: no limit).
        env_id: the id recorded on the episode (default ``env.spec.id``).
        reset_options: passed to ``env.reset``.
        executor: where env calls run.

    Returns:
        The `Episode`.
    """
    _check_options(layout, truncated_response)
    _check_max_turns(max_turns)
    sampling = sampling or SamplingParams()
    if env_id is None:
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    episode = Episode(env_id=env_id, seed=seed, layout=layout)
    conv = _Conversation(formatter, layout)
    start = time.perf_counter()
    generated = 0

    try:
        try:
            obs, _info = await _call(executor, env.reset, seed=seed, options=reset_options)
        except Exception as exc:
            _fail(episode, "env.reset", exc)
            return episode
        obs_text = _observation_text(obs)
        while True:
            if max_turns is not None and len(episode.turns) >= max_turns:
                episode.end_reason = "max_turns"
                break
            try:
                prompt_ids, starts = conv.add_observation(obs_text)
            except Exception as exc:
                _fail(episode, "formatter", exc)
                break
            if conv.rewrite_reason is not None:
                episode.template_rewrite = True
                warnings.warn(
                    "packed layout: " + conv.rewrite_reason + "; the sample is restarted from "
                    "the full rendering at this turn (episode.template_rewrite is set)",
                    TemplateRewriteWarning,
                    stacklevel=2,
                )
            if len(conv.prompt) + sampling.max_new_tokens > formatter.max_context:
                episode.end_reason = "context"
                break
            turn_sampling = (
                sampling
                if sampling.seed is None
                else sampling.replace(seed=derive_seed(sampling.seed, len(episode.turns)))
            )
            try:
                coro = policy.generate(list(conv.prompt), turn_sampling)
                if generation_timeout is not None:
                    result = await asyncio.wait_for(coro, generation_timeout)
                else:
                    result = await coro
                result = _check_result(result)
            except asyncio.TimeoutError:
                _fail(episode, "policy", PolicyError(f"generate() timed out after {generation_timeout} s"))
                break
            except Exception as exc:
                _fail(episode, "policy", exc)
                break
            generated += len(result.token_ids)
            truncated = result.finish_reason == "length"
            _content, action = conv.add_response(list(result.token_ids))
            turn = Turn(
                prompt_ids=prompt_ids,
                response_ids=list(result.token_ids),
                response_logprobs=[float(x) for x in result.logprobs],
                response_truncated=truncated,
                starts_sample=starts,
                observation=obs_text,
                action=action,
            )
            episode.turns.append(turn)
            if truncated and truncated_response == "penalize":
                turn.reward = float(truncation_reward)
                episode.end_reason = "response_truncated"
                break
            try:
                obs_text, over = _record_step(
                    episode, turn, await _call(executor, env.step, action)
                )
            except Exception as exc:
                _fail(episode, "env.step", exc)
                break
            if over:
                break
        episode.final_observation = obs_text
    finally:
        episode.stats.update(
            tokens_encoded=float(conv.encoded),
            generated_tokens=float(generated),
            wall_time_s=time.perf_counter() - start,
        )
    return episode


def _check_chat_result(result: Any) -> ChatResult:
    if not isinstance(result, ChatResult):
        raise PolicyError(f"policy.chat must return a ChatResult, got {type(result).__name__}")
    if not isinstance(result.text, str):
        raise PolicyError(
            f"malformed ChatResult: text must be a str, got {type(result.text).__name__}"
        )
    if result.finish_reason not in FINISH_REASONS:
        raise PolicyError(
            f"malformed ChatResult: finish_reason must be one of {FINISH_REASONS}, "
            f"got {result.finish_reason!r}"
        )
    for name in ("prompt_tokens", "completion_tokens"):
        n = getattr(result, name)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise PolicyError(
                f"malformed ChatResult: {name} must be a non-negative int or None, got {n!r}"
            )
    return result


async def run_chat_episode(
    env: Env,
    policy: ChatPolicy,
    *,
    system_prompt: str | None = None,
    seed: int | None = None,
    max_turns: int | None = None,
    sampling: SamplingParams | None = None,
    max_context: int | None = None,
    truncated_response: str = "pass",
    truncation_reward: float = -1.0,
    generation_timeout: float | None = None,
    env_id: str | None = None,
    reset_options: dict[str, Any] | None = None,
    executor: concurrent.futures.Executor | None = None,
) -> Episode:
    """Play one episode at the text level (chat messages in, text out); never raises for policy or env errors.

    The counterpart of `run_episode` for backends that take chat messages and return
    text (``/v1/chat/completions``): no tokenizer, no token ids. Each turn the whole
    conversation so far (`chat_messages`: optional system message, then the
    observations as ``user`` and the replies as ``assistant`` messages) goes to
    ``policy.chat``; the reply's text is the action sent to ``env.step`` (run in
    ``executor``, off the event loop) and the assistant message of later turns.

    Images: an observation ``{"text": ..., "images": [...]}`` with images becomes a
    ``user`` message of content parts (text, then one ``image_url`` part per image as a
    base64 ``data:`` URL; see `chat_content`); text observations stay plain strings.
    Each image is encoded once, when its observation arrives, but — the API being
    stateless — every later request of the episode re-sends it with the rest of the
    history, so a multi-turn image episode sends (and the server re-reads) each image
    once per remaining turn: about 4/3 of its size per request in base64. An image of a
    type that cannot be sent ends the episode with an ``"observation: InvalidArgument:
    ..."`` error. Only a summary is kept: ``turn.observation`` is the text, and
    ``turn.info["observation_images"]`` lists one ``{"mime", "bytes", "width",
    "height"}`` dict per image of that turn's observation (set only when it had images;
    ``width``/``height`` are read from PNG headers, else ``None``). Images of the
    final observation (never sent) are not encoded.

    The episode's turns have empty token lists (``prompt_ids``, ``response_ids``,
    ``response_logprobs``): it is for evaluation, not training. ``episode.layout`` is
    ``"per_turn"`` (every request carries the whole conversation). ``episode.stats``
    has ``requests``, ``wall_time_s``, — only when every reply reported ``usage`` —
    ``prompt_tokens`` and ``generated_tokens`` (sums over the requests), and — only when
    an observation had images — ``images_sent`` and ``image_bytes_sent`` (image parts
    and their decoded bytes over all requests, re-sends included).

    Ends (``episode.end_reason``) as `run_episode`, with the context budget checked
    from the server's counts: ``"context"`` when the previous request's prompt plus
    reply tokens plus ``sampling.max_new_tokens`` exceed ``max_context`` (a lower bound
    of the next request, so an episode is never ended early; without ``usage`` there is
    no client-side check), or when the server refuses a request as too long for its
    context (`ContextLengthExceeded`).

    Args:
        env: the env (not closed here).
        policy: a `ChatPolicy` (e.g. `gem_core.rl.policies.OpenAIChatPolicy`).
        system_prompt: text of a leading ``system`` message, or ``None``.
        seed, max_turns, sampling, truncated_response, truncation_reward,
            generation_timeout, env_id, reset_options, executor: as in `run_episode`.
        max_context: the token budget (see above); ``None``: none.

    Returns:
        The `Episode`.
    """
    _check_options("per_turn", truncated_response)
    _check_max_turns(max_turns)
    sampling = sampling or SamplingParams()
    if env_id is None:
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    episode = Episode(env_id=env_id, seed=seed, layout="per_turn")
    contents: list[str | list[dict[str, Any]]] = []  # the user messages' contents
    replies: list[str] = []
    usage: list[tuple[int | None, int | None]] = []
    image_bytes: list[int] = []  # decoded size of each image in the history
    images_sent = bytes_sent = 0
    start = time.perf_counter()

    try:
        try:
            obs, _info = await _call(executor, env.reset, seed=seed, options=reset_options)
        except Exception as exc:
            _fail(episode, "env.reset", exc)
            return episode
        obs_text = _observation_text(obs)
        while True:
            if max_turns is not None and len(episode.turns) >= max_turns:
                episode.end_reason = "max_turns"
                break
            if max_context is not None and usage:
                last_prompt, last_reply = usage[-1]
                if (
                    last_prompt is not None
                    and last_reply is not None
                    and last_prompt + last_reply + sampling.max_new_tokens > max_context
                ):
                    episode.end_reason = "context"
                    break
            try:
                content, obs_images = _content_and_images(obs)
            except Exception as exc:
                _fail(episode, "observation", exc)
                break
            contents.append(content)
            image_bytes.extend(im["bytes"] for im in obs_images)
            images_sent += len(image_bytes)
            bytes_sent += sum(image_bytes)
            turn_sampling = (
                sampling
                if sampling.seed is None
                else sampling.replace(seed=derive_seed(sampling.seed, len(episode.turns)))
            )
            try:
                messages = chat_messages(contents, replies, system_prompt=system_prompt)
                coro = policy.chat(messages, turn_sampling)
                if generation_timeout is not None:
                    result = await asyncio.wait_for(coro, generation_timeout)
                else:
                    result = await coro
                result = _check_chat_result(result)
            except ContextLengthExceeded as exc:
                episode.end_reason = "context"
                logger.warning("episode %s (seed %s) ended: %s", env_id, seed, exc)
                break
            except asyncio.TimeoutError:
                _fail(episode, "policy", PolicyError(f"chat() timed out after {generation_timeout} s"))
                break
            except Exception as exc:
                _fail(episode, "policy", exc)
                break
            usage.append((result.prompt_tokens, result.completion_tokens))
            replies.append(result.text)
            truncated = result.finish_reason == "length"
            turn = Turn(
                prompt_ids=[],
                response_ids=[],
                response_logprobs=[],
                response_truncated=truncated,
                starts_sample=True,
                observation=obs_text,
                action=result.text,
            )
            if obs_images:
                turn.info["observation_images"] = obs_images
            episode.turns.append(turn)
            if truncated and truncated_response == "penalize":
                turn.reward = float(truncation_reward)
                episode.end_reason = "response_truncated"
                break
            try:
                step = await _call(executor, env.step, result.text)
                obs_text, over = _record_step(episode, turn, step)
                obs = step[0]
            except Exception as exc:
                _fail(episode, "env.step", exc)
                break
            finally:
                if obs_images:
                    turn.info["observation_images"] = obs_images
            if over:
                break
        episode.final_observation = obs_text
    finally:
        episode.stats.update(requests=float(len(usage)), wall_time_s=time.perf_counter() - start)
        if image_bytes:
            episode.stats["images_sent"] = float(images_sent)
            episode.stats["image_bytes_sent"] = float(bytes_sent)
        if all(p is not None and c is not None for p, c in usage):
            episode.stats["prompt_tokens"] = float(sum(p or 0 for p, _ in usage))
            episode.stats["generated_tokens"] = float(sum(c or 0 for _, c in usage))
    return episode


class _EnvPool:
    """Reuses envs across the episodes of one collection (one user at a time each)."""

    def __init__(self, env_kwargs: Mapping[str, Any] | None, executor: concurrent.futures.Executor):
        self.env_kwargs = dict(env_kwargs or {})
        self.executor = executor
        self.free: dict[object, list[Env]] = {}
        self.all: list[Env] = []

    async def acquire(self, source: str | Callable[[], Env]) -> Env:
        key = source if isinstance(source, str) else id(source)
        free = self.free.setdefault(key, [])
        if free:
            return free.pop()
        if isinstance(source, str):
            from gem_core.registration import make

            env = await _call(self.executor, make, source, **self.env_kwargs)
        else:
            env = await _call(self.executor, source)
            if not isinstance(env, Env):
                raise InvalidArgument(
                    f"env factory {source!r} returned {type(env).__name__}, not a gem_core.Env"
                )
        self.all.append(env)
        return env

    def release(self, source: str | Callable[[], Env], env: Env, healthy: bool) -> None:
        if healthy:
            key = source if isinstance(source, str) else id(source)
            self.free.setdefault(key, []).append(env)
        else:
            self.all.remove(env)
            _close_quietly(env)

    def close(self) -> None:
        for env in self.all:
            _close_quietly(env)
        self.all.clear()
        self.free.clear()


def _close_quietly(env: Env) -> None:
    try:
        env.close()
    except Exception as exc:  # pragma: no cover - a failing close must not hide results
        logger.warning("closing %s raised %s: %s", env, type(exc).__name__, exc)


def _source_name(source: str | Callable[[], Env]) -> str:
    if isinstance(source, str):
        return source
    return (
        getattr(source, "__qualname__", None) or getattr(source, "__name__", None) or repr(source)
    )


async def collect_episodes(
    envs: str | Callable[[], Env] | Sequence[str | Callable[[], Env]],
    policy: Policy,
    formatter: ChatFormatter,
    *,
    seeds: Sequence[int | None],
    max_turns: int | None = None,
    sampling: SamplingParams | None = None,
    layout: str = "packed",
    concurrency: int = 32,
    truncated_response: str = "pass",
    truncation_reward: float = -1.0,
    generation_timeout: float | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    env_threads: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
) -> list[Episode]:
    """Run one episode per seed, up to ``concurrency`` at a time, on the running loop.

    Every episode is one `run_episode` coroutine; env construction, resets and steps run
    in a thread pool, so env work overlaps generation; envs are reused across episodes
    and closed at the end. A policy or env error ends only that episode
    (``episode.error``). With ``sampling.seed`` set, episode ``i`` samples with
    ``derive_seed(sampling.seed, "episode", i)``, so the result does not depend on
    ``concurrency`` or timing (up to the backend's batch numerics; exact with greedy
    decoding). Repeat a seed to get a GRPO group: episodes get
    ``group_id = f"{env_id}/{seed}"``.

    Args:
        envs: an env id (for `gem_core.make`) or a zero-argument factory returning an
            `Env`, used for every seed; or one per seed.
        policy: the model.
        formatter: the chat formatter.
        seeds: one env seed per episode.
        max_turns, sampling, layout, truncated_response, truncation_reward,
            generation_timeout: as in `run_episode`.
        concurrency: the most episodes in flight at once.
        env_kwargs: keyword arguments for `gem_core.make` (env ids only).
        env_threads: threads for env calls (default ``min(concurrency, 32)``).
        on_episode: called with each episode as it finishes (progress bars, logging).

    Returns:
        The episodes, in the order of ``seeds``.
    """
    _check_options(layout, truncated_response)
    seeds = list(seeds)
    if isinstance(envs, str) or callable(envs):
        sources: list[str | Callable[[], Env]] = [envs] * len(seeds)  # type: ignore[list-item]
    else:
        sources = list(envs)
        if len(sources) != len(seeds):
            raise InvalidArgument(
                f"got {len(sources)} envs for {len(seeds)} seeds: pass one env (id or "
                "factory) for all seeds, or exactly one per seed"
            )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidArgument(f"concurrency must be a positive int, got {concurrency!r}")
    sampling = sampling or SamplingParams()
    executor = concurrent.futures.ThreadPoolExecutor(
        max_workers=env_threads or min(concurrency, 32), thread_name_prefix="gem-env"
    )
    pool = _EnvPool(env_kwargs, executor)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, source: str | Callable[[], Env], seed: int | None) -> Episode:
        async with gate:
            name = _source_name(source)
            try:
                env = await pool.acquire(source)
            except Exception as exc:
                ep = Episode(env_id=name, seed=seed, layout=layout, end_reason="error")
                ep.error = f"env.make: {type(exc).__name__}: {exc}"
                logger.warning("could not build env %s: %s", name, exc)
            else:
                ep = await run_episode(
                    env,
                    policy,
                    formatter,
                    seed=seed,
                    max_turns=max_turns,
                    sampling=sampling.replace(seed=derive_seed(sampling.seed, "episode", i)),
                    layout=layout,
                    truncated_response=truncated_response,
                    truncation_reward=truncation_reward,
                    generation_timeout=generation_timeout,
                    env_id=name if not isinstance(source, str) else source,
                    executor=executor,
                )
                pool.release(source, env, healthy=not (ep.error or "").startswith("env."))
            ep.group_id = f"{ep.env_id}/{seed}"
            if on_episode is not None:
                on_episode(ep)
            return ep

    try:
        return list(
            await asyncio.gather(
                *(one(i, s, seed) for i, (s, seed) in enumerate(zip(sources, seeds, strict=True)))
            )
        )
    finally:
        await asyncio.get_running_loop().run_in_executor(executor, pool.close)
        executor.shutdown(wait=False)


def collect_episodes_sync(*args: Any, **kwargs: Any) -> list[Episode]:
    """`collect_episodes` from synchronous code (runs its own event loop).

    Raises:
        RuntimeError: called from a running event loop; ``await collect_episodes(...)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(collect_episodes(*args, **kwargs))
    raise RuntimeError(
        "collect_episodes_sync() was called inside a running event loop; "
        "use `await collect_episodes(...)` there"
    )
