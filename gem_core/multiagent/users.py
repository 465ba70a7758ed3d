"""User simulators: `ScriptedUser` (rules over a task's script) and `LLMUser` (any OpenAI-compatible model).

Both are `gem_core.multiagent.AgentPolicy` objects: ``act(observation, info)`` returns the
user's next message. A message containing `STOP_TOKEN` ends the conversation. The env
gives the user, in its ``info``: ``user_turn`` (0 on the user's first message of an
episode), ``instructions`` (the task's goal, persona and hidden facts in prose: the
`LLMUser`'s system prompt) and ``user_script`` (a `UserScript`: what `ScriptedUser`
follows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument, UserSimulatorError
from gem_core.multiagent.api import as_policy

__all__ = [
    "STOP_TOKEN",
    "UserScript",
    "ScriptedUser",
    "LLMUser",
    "UserSimulatorError",
    "make_user",
    "llm_user_system_prompt",
    "MAX_SCAN_CHARS",
]

STOP_TOKEN = "###STOP###"
"""What a user writes (anywhere in its message) to end the conversation."""

MAX_SCAN_CHARS = 4_000
"""`ScriptedUser` reads at most this many characters of a message (longer ones are cut)."""

DEFAULT_CONFIRM_KEYWORDS = ("confirm", "(yes/no)", "yes or no", "shall i proceed", "should i proceed")


@dataclass(frozen=True)
class UserScript:
    """What a `ScriptedUser` says in one task.

    Attributes:
        opening: the first message (the request).
        facts: ``(keywords, reply)`` pairs: when the assistant's message contains one of
            the keywords (case-insensitive), the user replies ``reply``. Tried in order.
        followups: further requests, one per assistant message that asks nothing the
            script knows (typically "anything else?").
        confirm: the reply to a confirmation question (a message containing one of
            ``confirm_keywords``), checked before the facts.
        stop: the last message, sent when the followups are used up; holds `STOP_TOKEN`.
        confirm_keywords: what marks a confirmation question.
    """

    opening: str
    facts: tuple[tuple[tuple[str, ...], str], ...] = ()
    followups: tuple[str, ...] = ()
    confirm: str = "Yes, please go ahead."
    stop: str = f"Thanks, that's all I needed. {STOP_TOKEN}"
    confirm_keywords: tuple[str, ...] = DEFAULT_CONFIRM_KEYWORDS

    def __post_init__(self) -> None:
        if STOP_TOKEN not in self.stop:
            raise InvalidArgument(f"UserScript.stop must contain {STOP_TOKEN!r}, got {self.stop!r}")
        keywords = [k for ks, _ in self.facts for k in ks] + list(self.confirm_keywords)
        upper = [k for k in keywords if k != k.casefold() or not k]
        if upper:
            raise InvalidArgument(
                f"UserScript keywords must be non-empty and lower-case (messages are matched "
                f"lower-cased), got {upper!r}"
            )


class ScriptedUser:
    """A deterministic rule-based user that follows the task's `UserScript`.

    First message: ``script.opening``. Then, for each assistant message (only its first
    `MAX_SCAN_CHARS` characters are read, lower-cased; each rule is a substring test, so
    a reply costs time linear in the message): a confirmation question gets
    ``script.confirm``; else the first fact whose keyword appears gets its reply; else the
    next followup; else ``script.stop`` (with `STOP_TOKEN`), which ends the conversation.
    Needs ``info["user_script"]``; a new episode starts at ``info["user_turn"] == 0`` or at
    `reset`.
    """

    def __init__(self) -> None:
        self._opened = False
        self._next_followup = 0

    def reset(self, *, seed: int | None = None) -> None:
        """Start a new conversation (the user is deterministic: ``seed`` is unused)."""
        self._opened = False
        self._next_followup = 0

    def act(self, observation: Any, info: Mapping[str, Any]) -> str:
        script = info.get("user_script") if isinstance(info, Mapping) else None
        if not isinstance(script, UserScript):
            raise UserSimulatorError(
                "ScriptedUser needs info['user_script'] (a UserScript) from the env; got "
                f"{type(script).__name__}. Use an env that provides one (tau:Retail-v0), or an LLMUser"
            )
        if info.get("user_turn") == 0:
            self.reset()
        if not self._opened:
            self._opened = True
            return script.opening
        text = observation[:MAX_SCAN_CHARS].casefold() if isinstance(observation, str) else ""
        if any(k in text for k in script.confirm_keywords):
            return script.confirm
        for keywords, reply in script.facts:
            if any(k in text for k in keywords):
                return reply
        if self._next_followup < len(script.followups):
            self._next_followup += 1
            return script.followups[self._next_followup - 1]
        return script.stop

    def __repr__(self) -> str:
        return "ScriptedUser()"


def llm_user_system_prompt(instructions: str, stop_token: str = STOP_TOKEN) -> str:
    """The system prompt of an `LLMUser`: the role, the task's instructions, the rules."""
    return (
        "You are role-playing a customer who contacts an online shop's customer service. "
        "The messages you receive are from the shop's assistant; you write the customer's "
        "replies.\n\n"
        f"Your instructions:\n{instructions.strip()}\n\n"
        "Rules:\n"
        "- Write only the customer's next message: one short message, no role labels.\n"
        "- Reveal the facts in your instructions only when the assistant asks for them; "
        "never invent facts you were not given (say you do not know).\n"
        "- Stay in character and pursue your goal; do not help the assistant with its job.\n"
        f"- When your goal is met, or the assistant cannot help, end the conversation: write "
        f"{stop_token} at the end of your last message."
    )


class LLMUser:
    """A user simulated by a chat model behind any OpenAI-compatible endpoint.

    The system prompt is `llm_user_system_prompt` of the task's ``info["instructions"]``;
    each assistant message arrives as a ``user`` chat message and each reply is kept as
    an ``assistant`` one, so the model sees the whole conversation. It ends the
    conversation by writing `STOP_TOKEN`; one that never does is cut off by the env's
    turn limit (the episode is truncated). Requests are seeded per turn (from the
    ``reset`` seed) for servers that honour ``seed``.

    Args:
        base_url: the API root (e.g. ``"http://127.0.0.1:8000/v1"``).
        model: the served model's name.
        client: instead of ``base_url``/``model``, any object with
            ``chat_sync(messages, sampling) -> ChatResult`` (e.g. an `OpenAIChatPolicy`).
        api_key: sent as ``Authorization: Bearer ...`` (default ``$OPENAI_API_KEY``).
        temperature, top_p, max_tokens: sampling of each reply.
        timeout, max_retries: per request, as in `OpenAIChatPolicy`.
        extra_body: extra JSON fields for every request.
        stop_token: what the model is told to write to end the conversation.

    Raises (from `act`):
        UserSimulatorError: the endpoint failed after its retries (the episode measured
            nothing: it is an error, not a failure of the assistant).
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        client: Any = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_tokens: int = 256,
        timeout: float = 120.0,
        max_retries: int = 3,
        extra_body: Mapping[str, Any] | None = None,
        stop_token: str = STOP_TOKEN,
    ):
        if client is None:
            if not base_url or not model:
                raise InvalidArgument(
                    "LLMUser needs base_url and model (an OpenAI-compatible endpoint), or a "
                    f"client with chat_sync(); got base_url={base_url!r}, model={model!r}"
                )
            from gem_core.rl.policies.openai_chat import OpenAIChatPolicy

            client = OpenAIChatPolicy(
                base_url,
                model,
                api_key=api_key,
                timeout=timeout,
                max_retries=max_retries,
                extra_body=dict(extra_body or {}),
            )
        elif not callable(getattr(client, "chat_sync", None)):
            raise InvalidArgument(
                f"LLMUser client must have chat_sync(messages, sampling), got {type(client).__name__}"
            )
        self.client = client
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.max_tokens = int(max_tokens)
        self.stop_token = stop_token
        self.messages: list[dict[str, str]] = []
        self._seed: int | None = None
        self._turn = 0

    def reset(self, *, seed: int | None = None) -> None:
        """Start a new conversation."""
        self.messages = []
        self._seed = seed
        self._turn = 0

    def act(self, observation: Any, info: Mapping[str, Any]) -> str:
        from gem_core.multiagent.api import derive_agent_seed
        from gem_core.rl.sampling import PolicyError, SamplingParams

        info = info if isinstance(info, Mapping) else {}
        if not self.messages or info.get("user_turn") == 0:
            instructions = info.get("instructions")
            if not isinstance(instructions, str) or not instructions.strip():
                raise UserSimulatorError(
                    "LLMUser needs info['instructions'] (the task's goal for the user) from the env"
                )
            self.messages = [
                {"role": "system", "content": llm_user_system_prompt(instructions, self.stop_token)}
            ]
            self._turn = 0
        self.messages.append({"role": "user", "content": str(observation or "")})
        sampling = SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_tokens,
            seed=derive_agent_seed(self._seed, f"turn{self._turn}"),
        )
        self._turn += 1
        try:
            result = self.client.chat_sync(self.messages, sampling)
        except PolicyError as exc:
            raise UserSimulatorError(f"the LLM user simulator failed: {exc}") from exc
        text = result.text if isinstance(getattr(result, "text", None), str) else ""
        self.messages.append({"role": "assistant", "content": text})
        return text

    def close(self) -> None:
        """Close the HTTP client. Safe to call twice."""
        close = getattr(self.client, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        where = getattr(self.client, "url", type(self.client).__name__)
        return f"LLMUser({where!s}, model={getattr(self.client, 'model', None)!r})"


def make_user(spec: Any) -> Any:
    """A user simulator from a spec (what an env's ``user=`` argument accepts).

    - ``None`` or ``"scripted"``: a `ScriptedUser`;
    - a mapping ``{"kind": "llm", "base_url": ..., "model": ..., **LLMUser options}``
      (JSON, so it fits ``gem eval --env-kwargs`` and run manifests), or
      ``{"kind": "scripted"}``;
    - a policy object (``act(observation, info)``) or callable, used as is.

    Raises:
        InvalidArgument: anything else (the message lists the forms).
    """
    if spec is None or spec == "scripted":
        return ScriptedUser()
    if isinstance(spec, Mapping):
        options = dict(spec)
        kind = options.pop("kind", None)
        if kind == "scripted" and not options:
            return ScriptedUser()
        if kind == "llm":
            return LLMUser(**options)
        raise InvalidArgument(
            f"user spec {dict(spec)!r}: expected {{'kind': 'llm', 'base_url': ..., 'model': ...}} "
            "or {'kind': 'scripted'}"
        )
    if isinstance(spec, str):
        raise InvalidArgument(
            f"user spec {spec!r}: expected 'scripted', a mapping {{'kind': 'llm', 'base_url': ..., "
            "'model': ...}}, or a policy object"
        )
    return as_policy(spec, agent="user")

