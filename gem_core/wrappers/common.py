"""The wrappers `make` applies: `PassiveEnvChecker`, `OrderEnforcing` and `TimeLimit`.

Also the one set of return-shape checks (`reset_return_problem`, `step_return_problem`)
that both the passive checker and `gem_core.checker.check_env` apply. This module imports
only `gem_core.core` and `gem_core.errors`, so the checker, the registry and the
wrappers form no import cycle.
"""

from __future__ import annotations

import warnings
from typing import Any

from gem_core.core import Env, Wrapper, find_layer
from gem_core.errors import ClosedEnvError, ResetNeeded, check_positive_int

__all__ = [
    "OrderEnforcing",
    "TimeLimit",
    "PassiveEnvChecker",
    "reset_return_problem",
    "step_return_problem",
    "check_reset_return",
    "check_step_return",
    "short_repr",
]


# --- return-shape checks (shared with gem_core.checker) -------------------------------
def short_repr(value: Any, limit: int = 80) -> str:
    """A repr that is safe and short enough for an error message."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not hide the real failure
        text = f"<{type(value).__name__} with a failing repr>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reset_return_problem(env: Any, result: Any) -> str | None:
    """What is wrong with ``result`` as the return of ``env.reset()``, or ``None``.

    The contract: the tuple ``(observation, info)`` with ``info`` a dict.
    """
    if not isinstance(result, tuple) or len(result) != 2:
        size = f" of length {len(result)}" if isinstance(result, tuple) else ""
        return (
            f"{env}.reset() returned {type(result).__name__}{size}; expected the tuple "
            "(observation, info). Likely bug: reset() returns the observation alone or "
            "forgets to return."
        )
    if not isinstance(result[1], dict):
        return (
            f"{env}.reset() returned info of type {type(result[1]).__name__}; expected a dict "
            "(return {} when there is nothing to report)."
        )
    return None


def step_return_problem(env: Any, action: Any, result: Any) -> str | None:
    """What is wrong with the shape of ``result`` as the return of ``env.step(action)``, or ``None``.

    The contract: the 5-tuple ``(observation, reward, terminated, truncated, info)`` with
    ``info`` a dict. (The values are checked by `check_step_return` and by check_env's
    named checks.)
    """
    if not isinstance(result, tuple) or len(result) != 5:
        size = f" of length {len(result)}" if isinstance(result, tuple) else ""
        return (
            f"{env}.step({short_repr(action, 40)}) returned {type(result).__name__}{size}; expected "
            "(observation, reward, terminated, truncated, info). Likely bug: the old Gym "
            "4-tuple API (obs, reward, done, info): split done into terminated and truncated."
        )
    if not isinstance(result[4], dict):
        return f"{env}.step() returned info of type {type(result[4]).__name__}; expected a dict."
    return None


def check_reset_return(env: Any, result: Any) -> None:
    """Raise `TypeError` when ``reset`` did not return ``(observation, info: dict)``."""
    problem = reset_return_problem(env, result)
    if problem is not None:
        raise TypeError(problem)


def check_step_return(env: Any, result: Any, action: Any = "...") -> None:
    """Raise `TypeError` when ``step`` did not return the 5-tuple of the contract.

    Beyond the shape: ``terminated``/``truncated`` must be bools (numpy bools pass) and
    ``reward`` a number (not a bool).
    """
    problem = step_return_problem(env, action, result)
    if problem is not None:
        raise TypeError(problem)
    _, reward, terminated, truncated, _ = result
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, bool):
            import numpy as np

            if not isinstance(flag, np.bool_):
                raise TypeError(f"{env}.step() returned {name}={flag!r}; it must be a bool")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        import numpy as np

        if not isinstance(reward, (np.integer, np.floating)):
            raise TypeError(f"{env}.step() returned reward={reward!r}; it must be a number")


def _warn(msg: str) -> None:
    warnings.warn(msg, UserWarning, stacklevel=4)


class PassiveEnvChecker(Wrapper):
    """Checks the first ``reset`` and ``step`` results of an env and explains mistakes.

    Type errors in the return values raise `TypeError` (they would corrupt a rollout);
    softer issues (non-text observation, missing ``success`` on a final step) warn once.
    Once the first step and the first episode end are checked, it binds ``step`` straight
    to the inner env (no per-step cost).
    """

    def __init__(self, env: Env):
        super().__init__(env)
        self._checked_reset = False
        self._checked_step = False
        self._checked_final = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        result = self.env.reset(seed=seed, options=options)
        if not self._checked_reset:
            self._checked_reset = True
            check_reset_return(self.env, result)
            obs = result[0]
            if not isinstance(obs, (str, dict, list)):
                _warn(
                    f"{self.env}.reset() returned a {type(obs).__name__} observation; "
                    "gem_core envs return text (or a dict / chat list)"
                )
        return result

    def step(self, action: Any):
        result = self.env.step(action)
        if not self._checked_step:
            self._checked_step = True
            check_step_return(self.env, result, action)
        if not self._checked_final and (result[2] or result[3]):
            self._checked_final = True
            if result[2] and "success" not in result[4]:
                _warn(
                    f"{self.env} ended an episode (terminated=True) without info['success']; "
                    "set it on the final step so success is never inferred from reward"
                )
        if self._checked_step and self._checked_final:
            # Every check has run: from now on calls go straight to the inner env's step,
            # so the checker costs nothing on the hot path.
            self.step = self.env.step  # type: ignore[method-assign]
        return result


class OrderEnforcing(Wrapper):
    """Enforces the episode life cycle.

    - ``step`` before the first ``reset`` raises `ResetNeeded`;
    - ``step`` after ``terminated`` or ``truncated`` raises `ResetNeeded` (no reward is
      paid for stepping a finished episode);
    - ``reset``/``step`` after ``close`` raise `ClosedEnvError`; ``close`` twice is safe.

    When the env under it keeps these books itself (``Env.keeps_episode_books``, e.g.
    every `LanguageGame`) and only passive checkers whose checks are done lie between,
    a ``reset`` hands the check to the env: ``step`` is then bound straight to the env's
    own ``step``, which calls back into this layer (and raises the same errors) when it is
    stepped after its episode ended. The layer then costs nothing per step.
    """

    def __init__(self, env: Env):
        super().__init__(env)
        self._has_reset = False
        self._live = False  # reset, not ended, not closed: the one flag a step reads
        self._closed = False
        # The env this layer handed its check to (see the class docstring), once fused.
        self._books: Env | None = None

    @property
    def has_reset(self) -> bool:
        return self._has_reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._closed:
            raise ClosedEnvError(f"reset() called on closed env {self.env}")
        result = self.env.reset(seed=seed, options=options)
        self._has_reset = True
        self._live = True  # while fused it stays True: the env's own flag ends the episode
        if self._books is None:
            self._fuse()
        return result

    def _fuse(self) -> None:
        layer = self.env
        while type(layer) is PassiveEnvChecker and "step" in vars(layer):
            layer = layer.env  # a checker that has bound its step to the env's
        if (
            not isinstance(layer, Wrapper)
            and getattr(layer, "keeps_episode_books", False)
            and getattr(layer, "_step_after_end", None) is None
        ):
            layer._step_after_end = self._refuse_step  # type: ignore[attr-defined]
            self._books = layer
            self.step = layer.step  # type: ignore[method-assign]

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

    def _end_episode(self) -> None:
        """End the episode for this layer (a `TimeLimit` above truncated it)."""
        self._live = False
        if self._books is not None:  # the env's own flag is the one its step reads
            self._books.done = True  # type: ignore[attr-defined]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._live = False
        if self._books is not None:
            vars(self).pop("step", None)
            # A layer above that is bound to the env's step still reaches the check.
            self._books.done = True  # type: ignore[attr-defined]
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
    is an `OrderEnforcing` (the `make` stack), one call does the work of both layers; when
    that `OrderEnforcing` has handed its check to an env that keeps the episode books
    itself (``Env.keeps_episode_books``) and the env's ``max_turns`` equals this layer's
    after a ``reset``, the env truncates at the same turn and reports the same
    ``info["turn"]``, so for that episode ``step`` is bound straight to the env's.
    """

    def __init__(self, env: Env, max_turns: int):
        check_positive_int("max_turns", max_turns)
        super().__init__(env)
        self._max_turns = max_turns
        self._elapsed = 0
        self._order: OrderEnforcing | None = find_layer(env, OrderEnforcing)
        # The OrderEnforcing right under this layer, whose checks `step` then runs inline.
        self._fused: OrderEnforcing | None = (
            env if type(env) is OrderEnforcing and "step" not in vars(env) else None
        )
        self._books: Env | None = None  # the env whose step this layer is bound to

    @property
    def max_turns(self) -> int:
        """The turn limit (settable; a new value applies from the current turn on)."""
        return self._max_turns

    @max_turns.setter
    def max_turns(self, value: int) -> None:
        check_positive_int("max_turns", value)
        self._unfuse()
        self._max_turns = value

    @property
    def elapsed_turns(self) -> int:
        books = self._books
        return self._elapsed if books is None else books.turn  # type: ignore[attr-defined]

    def _unfuse(self) -> None:
        books = self._books
        if books is not None:
            self._elapsed = books.turn  # type: ignore[attr-defined]
            self._books = None
            vars(self).pop("step", None)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._unfuse()
        self._elapsed = 0
        result = self.env.reset(seed=seed, options=options)
        order = self._fused
        books = None if order is None else order._books
        if books is not None and not order._closed and books.max_turns == self._max_turns:  # type: ignore[attr-defined]
            self._books = books
            self.step = books.step  # type: ignore[method-assign]
        return result

    def close(self) -> None:
        self._unfuse()
        self.env.close()

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
        if elapsed >= self._max_turns:
            if self._order is not None:
                self._order._end_episode()
            return result[0], result[1], result[2], True, result[4]
        return result
