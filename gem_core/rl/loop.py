"""The episode loop: `run_episode` (token ids, packed or per-turn) and `run_chat_episode` (chat text).

Both are one loop, `_play`: reset, then per turn the turn limit, the prompt (and its
context budget), one policy call with its per-turn seed and timeout, the truncation
policy, ``env.step``, and the error flagging of every stage. What differs — how a
prompt is built and how a generation is requested and recorded — is a small strategy
object (`_TokenTurns` over the public `TokenConversation`, `_ChatTurns`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import warnings
from collections.abc import Awaitable, Mapping
from typing import Any

from gem_core.core import Env, observation_text
from gem_core.errors import InvalidArgument, check_positive_int
from gem_core.rl.chat import (
    ChatFormatter,
    TemplateRewriteWarning,
    _content_and_images,
    chat_messages,
)
from gem_core.rl.env_calls import EnvCaller
from gem_core.rl.sampling import (
    ChatPolicy,
    ContextLengthExceeded,
    Policy,
    PolicyError,
    SamplingParams,
    _check_chat_result,
    _check_result,
    derive_seed,
)
from gem_core.rl.types import LAYOUTS, Episode, Turn

__all__ = ["TRUNCATED_RESPONSE_POLICIES", "TokenConversation", "run_episode", "run_chat_episode"]

logger = logging.getLogger(__name__)

TRUNCATED_RESPONSE_POLICIES = ("pass", "penalize")


class _Failed(Exception):
    """A strategy's stage failed: flag the episode with ``where`` and ``exc``."""

    def __init__(self, where: str, exc: Exception):
        super().__init__(where)
        self.where = where
        self.exc = exc


class _Turns:
    """What `_play` asks of one kind of episode (the strategy of the shared loop).

    Attributes:
        layout: the episode's layout.
        method: the policy method's name, for the timeout message.
        refusal_ends_episode: a `ContextLengthExceeded` from the policy ends the episode
            with ``"context"`` (a budget) instead of flagging it as an error.
    """

    layout: str = "per_turn"
    method: str = ""
    refusal_ends_episode: bool = False

    def prompt(self, episode: Episode, obs: Any, obs_text: str, sampling: SamplingParams) -> Any:
        """The next request's prompt for observation ``obs``, or ``None`` when it does not
        fit the context budget (the episode ends with ``"context"``, the turn unplayed).

        Raises:
            _Failed: the observation could not be made into a prompt.
        """
        raise NotImplementedError

    def request(self, prompt: Any, sampling: SamplingParams) -> Awaitable[Any]:
        """The policy call for ``prompt``."""
        raise NotImplementedError

    def check(self, result: Any) -> Any:
        """``result`` if it is well formed, else `PolicyError`."""
        raise NotImplementedError

    def record(self, result: Any, obs_text: str) -> tuple[Turn, str]:
        """``(turn, action for env.step)`` of a checked result."""
        raise NotImplementedError

    def stats(self, wall_time_s: float) -> dict[str, float]:
        """The episode's counters (see `Episode.stats`)."""
        raise NotImplementedError


async def _play(
    env: Env,
    turns: _Turns,
    *,
    seed: int | None,
    max_turns: int | None,
    sampling: SamplingParams | None,
    truncated_response: str,
    truncation_reward: float,
    generation_timeout: float | None,
    env_id: str | None,
    reset_options: dict[str, Any] | None,
    executor: concurrent.futures.Executor | None,
    env_calls: str,
) -> Episode:
    """The one episode loop behind `run_episode` and `run_chat_episode` (see them)."""
    _check_options(turns.layout, truncated_response)
    _check_max_turns(max_turns)
    call_env = EnvCaller(env_calls, executor)
    sampling = sampling or SamplingParams()
    if env_id is None:
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    episode = Episode(env_id=env_id, seed=seed, layout=turns.layout)
    start = time.perf_counter()
    try:
        try:
            obs, _info = await call_env(env, "reset", seed=seed, options=reset_options)
        except Exception as exc:
            _fail(episode, "env.reset", exc)
            return episode
        obs_text = observation_text(obs)
        while True:
            if max_turns is not None and len(episode.turns) >= max_turns:
                episode.end_reason = "max_turns"
                break
            try:
                prompt = turns.prompt(episode, obs, obs_text, sampling)
            except _Failed as failed:
                _fail(episode, failed.where, failed.exc)
                break
            if prompt is None:
                episode.end_reason = "context"
                break
            turn_sampling = (
                sampling
                if sampling.seed is None
                else sampling.replace(seed=derive_seed(sampling.seed, len(episode.turns)))
            )
            try:
                coro = turns.request(prompt, turn_sampling)
                if generation_timeout is not None:
                    result = await asyncio.wait_for(coro, generation_timeout)
                else:
                    result = await coro
                result = turns.check(result)
            except ContextLengthExceeded as exc:
                if not turns.refusal_ends_episode:
                    _fail(episode, "policy", exc)
                    break
                episode.end_reason = "context"
                logger.warning("episode %s (seed %s) ended: %s", env_id, seed, exc)
                break
            except asyncio.TimeoutError:
                timed_out = f"{turns.method}() timed out after {generation_timeout} s"
                _fail(episode, "policy", PolicyError(timed_out))
                break
            except Exception as exc:
                _fail(episode, "policy", exc)
                break
            turn, action = turns.record(result, obs_text)
            episode.turns.append(turn)
            if turn.response_truncated and truncated_response == "penalize":
                turn.reward = float(truncation_reward)
                episode.end_reason = "response_truncated"
                break
            try:
                step = await call_env(env, "step", action)
                obs_text, over = _record_step(episode, turn, step)
                obs = step[0]
            except Exception as exc:
                _fail(episode, "env.step", exc)
                break
            if over:
                break
        episode.final_observation = obs_text
    finally:
        episode.stats.update(turns.stats(time.perf_counter() - start))
    return episode


class TokenConversation:
    """The token state of one episode's conversation, built token-exactly.

    What `run_episode` uses to turn observations and generated ids into prompt ids, for
    trainers whose own loop needs the same rows (e.g. ROLL's per-step env managers):
    `add_observation` renders the chat with the new observation and appends only the
    token delta (packed layout; the whole prompt in the per-turn layout, or when the
    template rewrites earlier turns — then ``rewrite_reason`` says why and the sample
    restarts), `add_response` appends the generated ids exactly as generated.
    ``prompt_ids`` is what the policy conditions on for the next response.

    Args:
        formatter: the `ChatFormatter` (tokenizer, system prompt, template kwargs).
        layout: ``"packed"`` (default) or ``"per_turn"``.
    """

    def __init__(self, formatter: ChatFormatter, layout: str = "packed"):
        if layout not in LAYOUTS:
            raise InvalidArgument(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.f = formatter
        self.layout = layout
        self.observations: list[str] = []
        self.contents: list[str] = []
        self.prompt_ids: list[int] = []  # what the policy conditions on for the next response
        self.text = ""  # packed: the rendered text ``self.prompt_ids`` stands for
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
                self.prompt_ids.extend(delta)
                self.text = new_text
                return delta, False
        ids = self._encode(new_text)
        self.prompt_ids = list(ids)
        self.text = new_text
        return ids, True

    def add_response(self, token_ids: list[int]) -> tuple[str, str]:
        """Append a response; return ``(chat content, action text)``."""
        stopped = bool(token_ids) and token_ids[-1] in self.f.stop_token_ids
        body = token_ids[:-1] if stopped else token_ids
        content = self.f.decode(body, skip_special_tokens=False)
        action = self.f.decode(body, skip_special_tokens=True)
        self.contents.append(content)
        self.prompt_ids.extend(token_ids)
        self.text += content + (self.f.decode(token_ids[-1:]) if stopped else "")
        return content, action



class _TokenTurns(_Turns, TokenConversation):
    """Token ids in, token ids out (`run_episode`): a `TokenConversation` under a layout
    (see `Turn` for the layouts) plus the policy call."""

    method = "generate"

    def __init__(self, policy: Policy, formatter: ChatFormatter, layout: str):
        TokenConversation.__init__(self, formatter, layout)
        self.policy = policy
        self.generated = 0
        self.turn_prompt: tuple[list[int], bool] = ([], True)  # the turn's prompt_ids, starts

    def prompt(
        self, episode: Episode, obs: Any, obs_text: str, sampling: SamplingParams
    ) -> list[int] | None:
        try:
            self.turn_prompt = self.add_observation(obs_text)
        except Exception as exc:
            raise _Failed("formatter", exc) from exc
        if self.rewrite_reason is not None:
            episode.template_rewrite = True
            warnings.warn(
                "packed layout: " + self.rewrite_reason + "; the sample is restarted from "
                "the full rendering at this turn (episode.template_rewrite is set)",
                TemplateRewriteWarning,
                stacklevel=4,  # the caller of run_episode
            )
        if len(self.prompt_ids) + sampling.max_new_tokens > self.f.max_context:
            return None
        return list(self.prompt_ids)

    def request(self, prompt: list[int], sampling: SamplingParams) -> Awaitable[Any]:
        return self.policy.generate(prompt, sampling)

    def check(self, result: Any) -> Any:
        return _check_result(result)

    def record(self, result: Any, obs_text: str) -> tuple[Turn, str]:
        self.generated += len(result.token_ids)
        _content, action = self.add_response(list(result.token_ids))
        prompt_ids, starts = self.turn_prompt
        turn = Turn(
            prompt_ids=prompt_ids,
            response_ids=list(result.token_ids),
            response_logprobs=[float(x) for x in result.logprobs],
            response_truncated=result.finish_reason == "length",
            starts_sample=starts,
            observation=obs_text,
            action=action,
        )
        return turn, action

    def stats(self, wall_time_s: float) -> dict[str, float]:
        return {
            "tokens_encoded": float(self.encoded),
            "generated_tokens": float(self.generated),
            "wall_time_s": wall_time_s,
        }

class _ChatTurns(_Turns):
    """Chat messages in, text out (`run_chat_episode`): the conversation so far, the
    server's token counts and the images sent."""

    method = "chat"
    refusal_ends_episode = True

    def __init__(self, policy: ChatPolicy, system_prompt: str | None, max_context: int | None):
        self.policy = policy
        self.system_prompt = system_prompt
        self.max_context = max_context
        self.contents: list[str | list[dict[str, Any]]] = []  # the user messages' contents
        self.replies: list[str] = []
        self.usage: list[tuple[int | None, int | None]] = []
        self.image_bytes: list[int] = []  # decoded size of each image in the history
        self.images_sent = self.bytes_sent = 0
        self.obs_images: list[dict[str, Any]] = []  # summaries of this turn's images

    def prompt(
        self, episode: Episode, obs: Any, obs_text: str, sampling: SamplingParams
    ) -> list[str | list[dict[str, Any]]] | None:
        if self.max_context is not None and self.usage:
            last_prompt, last_reply = self.usage[-1]
            if (
                last_prompt is not None
                and last_reply is not None
                and last_prompt + last_reply + sampling.max_new_tokens > self.max_context
            ):
                return None
        try:
            content, self.obs_images = _content_and_images(obs)
        except Exception as exc:
            raise _Failed("observation", exc) from exc
        self.contents.append(content)
        self.image_bytes.extend(im["bytes"] for im in self.obs_images)
        self.images_sent += len(self.image_bytes)
        self.bytes_sent += sum(self.image_bytes)
        return self.contents

    def request(
        self, prompt: list[str | list[dict[str, Any]]], sampling: SamplingParams
    ) -> Awaitable[Any]:
        messages = chat_messages(prompt, self.replies, system_prompt=self.system_prompt)
        return self.policy.chat(messages, sampling)

    def check(self, result: Any) -> Any:
        return _check_chat_result(result)

    def record(self, result: Any, obs_text: str) -> tuple[Turn, str]:
        self.usage.append((result.prompt_tokens, result.completion_tokens))
        self.replies.append(result.text)
        turn = Turn(
            prompt_ids=[],
            response_ids=[],
            response_logprobs=[],
            response_truncated=result.finish_reason == "length",
            starts_sample=True,
            observation=obs_text,
            action=result.text,
        )
        if self.obs_images:
            turn.info["observation_images"] = self.obs_images  # kept beside the env's info
        return turn, result.text

    def stats(self, wall_time_s: float) -> dict[str, float]:
        stats = {"requests": float(len(self.usage)), "wall_time_s": wall_time_s}
        if self.image_bytes:
            stats["images_sent"] = float(self.images_sent)
            stats["image_bytes_sent"] = float(self.bytes_sent)
        if all(p is not None and c is not None for p, c in self.usage):
            stats["prompt_tokens"] = float(sum(p or 0 for p, _ in self.usage))
            stats["generated_tokens"] = float(sum(c or 0 for _, c in self.usage))
        return stats


def _fail(episode: Episode, where: str, exc: BaseException) -> None:
    """End ``episode`` flagged with the error raised in ``where``; the other episodes go on."""
    episode.error = f"{where}: {type(exc).__name__}: {exc}"
    episode.end_reason = "error"
    logger.warning(
        "episode %s (seed %s) failed in %s: %s", episode.env_id, episode.seed, where, exc
    )


def _check_max_turns(max_turns: int | None) -> None:
    check_positive_int("max_turns", max_turns, allow_none=True)


def _record_step(episode: Episode, turn: Turn, step: tuple[Any, ...]) -> tuple[str, bool]:
    """Record an ``env.step`` result on ``turn``/``episode``: ``(observation text, episode over)``.

    The env's ``info`` becomes ``turn.info``; what the strategy put there before the
    step (``observation_images``) is kept over it.
    """
    obs, reward, terminated, env_truncated, info = step
    turn.reward = float(reward)
    turn.info = {**(dict(info) if isinstance(info, Mapping) else {}), **turn.info}
    turn.format_error = bool(turn.info.get("format_error", False))
    episode.success = bool(turn.info.get("success", False))
    if terminated:
        episode.end_reason = "terminated"
    elif env_truncated:
        episode.end_reason = "env_truncated"
    return observation_text(obs), bool(terminated or env_truncated)


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
    env_calls: str = "auto",
) -> Episode:
    """Play one episode of ``env`` with ``policy``; never raises for policy or env errors.

    Each turn: the observation is formatted (see the layouts in `Turn`), the policy
    generates a response, the response (decoded, special tokens skipped) goes to
    ``env.step``. ``env.reset`` and ``env.step`` run where ``env_calls`` says: by default
    (``"auto"``) on the event loop while they are quick (at most 1 ms), else in
    ``executor`` (the loop's default thread pool when ``None``), so other episodes keep
    generating meanwhile (`gem_core.rl.env_calls`).

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
        executor: where env calls run when not on the event loop.
        env_calls: ``"auto"`` (default), ``"thread"`` (always ``executor``) or
            ``"inline"`` (always the event loop); see `gem_core.rl.env_calls`.

    Returns:
        The `Episode`.
    """
    return await _play(
        env,
        _TokenTurns(policy, formatter, layout),
        seed=seed,
        max_turns=max_turns,
        sampling=sampling,
        truncated_response=truncated_response,
        truncation_reward=truncation_reward,
        generation_timeout=generation_timeout,
        env_id=env_id,
        reset_options=reset_options,
        executor=executor,
        env_calls=env_calls,
    )


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
    env_calls: str = "auto",
) -> Episode:
    """Play one episode at the text level (chat messages in, text out); never raises for policy or env errors.

    The counterpart of `run_episode` for backends that take chat messages and return
    text (``/v1/chat/completions``): no tokenizer, no token ids. Each turn the whole
    conversation so far (`chat_messages`: optional system message, then the
    observations as ``user`` and the replies as ``assistant`` messages) goes to
    ``policy.chat``; the reply's text is the action sent to ``env.step`` (run as
    ``env_calls`` says, see `run_episode`) and the assistant message of later turns.

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
            generation_timeout, env_id, reset_options, executor, env_calls: as in
            `run_episode`.
        max_context: the token budget (see above); ``None``: none.

    Returns:
        The `Episode`.
    """
    return await _play(
        env,
        _ChatTurns(policy, system_prompt, max_context),
        seed=seed,
        max_turns=max_turns,
        sampling=sampling,
        truncated_response=truncated_response,
        truncation_reward=truncation_reward,
        generation_timeout=generation_timeout,
        env_id=env_id,
        reset_options=reset_options,
        executor=executor,
        env_calls=env_calls,
    )
