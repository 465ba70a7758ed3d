"""The wrappers `make` applies: `OrderEnforcing` and `TimeLimit` (plus the passive checker)."""

from __future__ import annotations

from typing import Any

from gem_core.checker import PassiveEnvChecker
from gem_core.core import Env, Wrapper
from gem_core.errors import ClosedEnvError, InvalidArgument, ResetNeeded

__all__ = ["OrderEnforcing", "TimeLimit", "PassiveEnvChecker"]


class OrderEnforcing(Wrapper):
    """Enforces the episode life cycle.

    - ``step`` before the first ``reset`` raises `ResetNeeded`;
    - ``step`` after ``terminated`` or ``truncated`` raises `ResetNeeded` (no reward is
      paid for stepping a finished episode);
    - ``reset``/``step`` after ``close`` raise `ClosedEnvError`; ``close`` twice is safe.
    """

    def __init__(self, env: Env):
        super().__init__(env)
        self._has_reset = False
        self._done = False
        self._closed = False

    @property
    def has_reset(self) -> bool:
        return self._has_reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._closed:
            raise ClosedEnvError(f"reset() called on closed env {self.env}")
        result = self.env.reset(seed=seed, options=options)
        self._has_reset = True
        self._done = False
        return result

    def step(self, action: Any):
        if self._closed:
            raise ClosedEnvError(f"step() called on closed env {self.env}")
        if not self._has_reset:
            raise ResetNeeded(f"step() called before reset() on {self.env}; call env.reset() first")
        if self._done:
            raise ResetNeeded(
                f"step() called after the episode of {self.env} ended "
                "(terminated or truncated); call env.reset() to start a new one"
            )
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._done = bool(terminated or truncated)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.env.close()


class TimeLimit(Wrapper):
    """Ends an episode with ``truncated=True`` after ``max_turns`` steps.

    A step that both terminates the task and reaches the limit reports
    ``terminated=True, truncated=False``: the task outcome takes precedence. Sets
    ``info["turn"]`` (1-based) on every step.
    """

    def __init__(self, env: Env, max_turns: int):
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise InvalidArgument(f"max_turns must be a positive int, got {max_turns!r}")
        super().__init__(env)
        self.max_turns = max_turns
        self._elapsed = 0
        self._done = True
        self._has_reset = False

    @property
    def elapsed_turns(self) -> int:
        return self._elapsed

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._elapsed = 0
        self._done = False
        self._has_reset = True
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any):
        if self._done and self._has_reset:
            raise ResetNeeded(
                f"step() called after the episode of {self.env} ended "
                f"(turn limit {self.max_turns} or task end); call env.reset()"
            )
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._elapsed += 1
        if self._elapsed >= self.max_turns and not terminated:
            truncated = True
        info["turn"] = self._elapsed
        self._done = bool(terminated or truncated)
        return obs, reward, terminated, truncated, info
