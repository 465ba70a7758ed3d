"""The wrappers `make` applies: `OrderEnforcing` and `TimeLimit` (plus the passive checker)."""

from __future__ import annotations

from typing import Any

from gem_core.checker import PassiveEnvChecker
from gem_core.core import Env, Wrapper, find_layer
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
        self._live = False  # reset, not ended, not closed: the one flag a step reads
        self._closed = False

    @property
    def has_reset(self) -> bool:
        return self._has_reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._closed:
            raise ClosedEnvError(f"reset() called on closed env {self.env}")
        result = self.env.reset(seed=seed, options=options)
        self._has_reset = True
        self._live = True
        return result

    def step(self, action: Any):
        if not self._live:
            self._refuse_step()
        result = self.env.step(action)
        if result[2] or result[3]:
            self._live = False
        return result

    def _refuse_step(self) -> None:
        if self._closed:
            raise ClosedEnvError(f"step() called on closed env {self.env}")
        if not self._has_reset:
            raise ResetNeeded(f"step() called before reset() on {self.env}; call env.reset() first")
        raise ResetNeeded(
            f"step() called after the episode of {self.env} ended "
            "(terminated or truncated); call env.reset() to start a new one"
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._live = False
        self.env.close()


class TimeLimit(Wrapper):
    """Ends an episode with ``truncated=True`` after ``max_turns`` steps.

    A step that both terminates the task and reaches the limit reports
    ``terminated=True, truncated=False``: the task outcome takes precedence. Sets
    ``info["turn"]`` (1-based) on every step.

    Stepping a finished episode is refused by `OrderEnforcing`, not here: a truncation
    made by this layer ends the episode for the nearest `OrderEnforcing` under it (every
    `gem_core.make` stack has one), which then raises `ResetNeeded`. On its own, this layer
    keeps counting and keeps reporting ``truncated=True``. When the layer right under it
    is an `OrderEnforcing` (the `make` stack), one call does the work of both layers.
    """

    def __init__(self, env: Env, max_turns: int):
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise InvalidArgument(f"max_turns must be a positive int, got {max_turns!r}")
        super().__init__(env)
        self.max_turns = max_turns
        self._elapsed = 0
        self._order: OrderEnforcing | None = find_layer(env, OrderEnforcing)
        # The OrderEnforcing right under this layer, whose checks `step` then runs inline.
        self._fused: OrderEnforcing | None = (
            env if type(env) is OrderEnforcing and "step" not in vars(env) else None
        )

    @property
    def elapsed_turns(self) -> int:
        return self._elapsed

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._elapsed = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any):
        order = self._fused
        if order is None:
            result = self.env.step(action)
        else:  # OrderEnforcing.step, inline
            if not order._live:
                order._refuse_step()
            result = order.env.step(action)
        self._elapsed = elapsed = self._elapsed + 1
        result[4]["turn"] = elapsed
        if result[2] or result[3]:
            if order is not None:
                order._live = False
            return result
        if elapsed >= self.max_turns:
            if self._order is not None:
                self._order._live = False
            return result[0], result[1], result[2], True, result[4]
        return result
