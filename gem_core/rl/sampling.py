"""What a policy is: the `Policy` / `ChatPolicy` protocols, `SamplingParams`, their results and errors."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from gem_core.errors import ContextLengthExceeded, InvalidArgument, PolicyError, check_positive_int

__all__ = [
    "PolicyError",
    "ContextLengthExceeded",
    "SamplingParams",
    "GenerationResult",
    "Policy",
    "ChatResult",
    "ChatPolicy",
    "FINISH_REASONS",
    "derive_seed",
]

#: The finish reasons a backend may report.
FINISH_REASONS = ("stop", "length")


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
        check_positive_int("max_new_tokens", self.max_new_tokens)
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


def derive_seed(base: int | None, *keys: object) -> int | None:
    """A deterministic 63-bit seed from ``base`` and ``keys`` (``None`` stays ``None``)."""
    if base is None:
        return None
    digest = hashlib.blake2b(repr((base, *keys)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


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
