"""Two tiny built-in envs for tests, demos and benchmarks: a cheap one and a CPU-heavy one."""

from __future__ import annotations

import re
from typing import Any

from gem_core.core import Env
from gem_core.errors import InvalidArgument, check_positive_int

__all__ = ["EchoEnv", "PrimeCountEnv", "count_primes"]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_MAX_ACTION_CHARS = 10_000


def _as_text(action: Any) -> str | None:
    """The action as text, or None when it is not a string (a format error)."""
    return action if isinstance(action, str) else None


class EchoEnv(Env[str, str]):
    """Repeat a random word back; the cheapest possible multi-turn env.

    Observation: an instruction naming a random lowercase word, plus feedback on the
        previous attempt.
    Action: text; leading/trailing whitespace is ignored.
    Rewards: 1.0 when the action equals the word (episode terminates, success);
        0.0 for a wrong attempt; ``format_penalty`` (default -0.1) for a non-text or
        empty action.
    Episode end: terminated on success; truncated by the turn limit (``max_turns=4``
        when made through the registry).
    Args:
        word_length: letters in the word.
        format_penalty: reward for a non-text or empty action.
    Version history: v0 — initial version.
    """

    metadata = {"category": "toy"}

    def __init__(self, word_length: int = 5, format_penalty: float = -0.1):
        check_positive_int("word_length", word_length)
        self.word_length = word_length
        self.format_penalty = float(format_penalty)
        self.word = ""
        self.turn = 0

    def _instruction(self) -> str:
        return f"Reply with exactly this word and nothing else: {self.word}"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        rng = self.rng
        self.word = "".join(rng.choice(_LETTERS) for _ in range(self.word_length))
        self.turn = 0
        return self._instruction(), {}

    def step(self, action: str):
        self.turn += 1
        text = _as_text(action)
        if text is None or not text.strip():
            what = "an empty reply" if text is not None else f"a {type(action).__name__}"
            obs = f"Invalid action: expected a word, got {what}. {self._instruction()}"
            info = {"format_error": True, "invalid_action": True, "turn": self.turn, "success": False}
            return obs, self.format_penalty, False, False, info
        guess = text.strip()[:_MAX_ACTION_CHARS]
        if guess == self.word:
            info = {"parsed_action": guess, "format_error": False, "turn": self.turn, "success": True}
            return "Correct!", 1.0, True, False, info
        shown = guess if len(guess) <= 40 else guess[:37] + "..."
        obs = f"{shown!r} is not the word. {self._instruction()}"
        info = {"parsed_action": guess, "format_error": False, "turn": self.turn, "success": False}
        return obs, 0.0, False, False, info

    def sample_random_action(self) -> str:
        if self.rng.random() < 0.5 and self.word:
            return self.word
        return "".join(self.rng.choice(_LETTERS) for _ in range(self.word_length))


def count_primes(n: int) -> int:
    """Number of primes <= n, by a plain-Python sieve (deliberately CPU-bound)."""
    if n < 2:
        return 0
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    i = 2
    while i * i <= n:
        if sieve[i]:
            for j in range(i * i, n + 1, i):
                sieve[j] = 0
        i += 1
    return sum(sieve)


class PrimeCountEnv(Env[str, str]):
    """Say how many primes are at most N; each step costs real CPU (a Python sieve).

    Stands in for envs whose step does heavy work (graders, simulators) in tests and
    in the vectorization benchmarks.

    Observation: the question "How many primes are <= N?" plus feedback
        ("too low" / "too high") on the previous answer.
    Action: text containing an integer (the last integer in the text is the answer).
    Rewards: 1.0 for the right count (terminates, success); 0.0 for a wrong count;
        ``format_penalty`` (default -0.1) when no integer can be parsed.
    Episode end: terminated on success; truncated by the turn limit (``max_turns=8``
        when made through the registry).
    Args:
        max_n: N is drawn uniformly from [max_n // 2, max_n] at reset; the sieve runs
            over N on every step, so larger values cost more CPU per step.
        format_penalty: reward for an unparsable action.
    Version history: v0 — initial version.
    """

    metadata = {"category": "toy"}
    _INT_RE = re.compile(r"-?\d+")

    def __init__(self, max_n: int = 30_000, format_penalty: float = -0.1):
        if not isinstance(max_n, int) or max_n < 4:
            raise InvalidArgument(f"max_n must be an int >= 4, got {max_n!r}")
        self.max_n = max_n
        self.format_penalty = float(format_penalty)
        self.n = 0
        self.turn = 0

    def _question(self) -> str:
        return f"How many prime numbers are less than or equal to {self.n}? Answer with an integer."

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.n = self.rng.randint(self.max_n // 2, self.max_n)
        self.turn = 0
        return self._question(), {}

    def step(self, action: str):
        self.turn += 1
        truth = count_primes(self.n)  # the CPU-heavy part, on purpose
        text = _as_text(action)
        numbers = self._INT_RE.findall(text[-_MAX_ACTION_CHARS:]) if text else []
        if not numbers:
            obs = f"Invalid action: no integer found. {self._question()}"
            info = {"format_error": True, "invalid_action": True, "turn": self.turn, "success": False}
            return obs, self.format_penalty, False, False, info
        digits = numbers[-1]
        answer = int(digits) if len(digits) <= 20 else (10**20 if digits[0] != "-" else -(10**20))
        info = {"parsed_action": answer, "format_error": False, "turn": self.turn, "success": answer == truth}
        if answer == truth:
            return "Correct!", 1.0, True, False, info
        hint = "too low" if answer < truth else "too high"
        return f"{answer} is {hint}. {self._question()}", 0.0, False, False, info

    def sample_random_action(self) -> str:
        return str(self.rng.randint(0, self.n or self.max_n))
