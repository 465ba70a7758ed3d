"""Env conformance: the passive checker that `make` applies, and `check_env`."""

from __future__ import annotations

import warnings
from typing import Any

from gem_core.core import Env, Wrapper

__all__ = ["PassiveEnvChecker", "check_reset_return", "check_step_return"]


def _warn(msg: str) -> None:
    warnings.warn(msg, UserWarning, stacklevel=4)


def check_reset_return(env: Any, result: Any) -> None:
    """Raise `TypeError` when ``reset`` did not return ``(observation, info: dict)``."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise TypeError(
            f"{env}.reset() must return (observation, info), got {type(result).__name__}"
            f"{f' of length {len(result)}' if isinstance(result, tuple) else ''}. "
            "Did reset() forget to return, or return the observation alone?"
        )
    if not isinstance(result[1], dict):
        raise TypeError(
            f"{env}.reset() must return info as a dict, got {type(result[1]).__name__}"
        )


def check_step_return(env: Any, result: Any) -> None:
    """Raise `TypeError` when ``step`` did not return the 5-tuple of the contract."""
    if not isinstance(result, tuple) or len(result) != 5:
        raise TypeError(
            f"{env}.step() must return (observation, reward, terminated, truncated, info), "
            f"got {type(result).__name__}"
            f"{f' of length {len(result)}' if isinstance(result, tuple) else ''}. "
            "An old 4-tuple API (obs, reward, done, info)? Split done into terminated/truncated."
        )
    _, reward, terminated, truncated, info = result
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, bool):
            import numpy as np

            if not isinstance(flag, np.bool_):
                raise TypeError(f"{env}.step() returned {name}={flag!r}; it must be a bool")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        import numpy as np

        if not isinstance(reward, (np.integer, np.floating)):
            raise TypeError(f"{env}.step() returned reward={reward!r}; it must be a number")
    if not isinstance(info, dict):
        raise TypeError(f"{env}.step() must return info as a dict, got {type(info).__name__}")


class PassiveEnvChecker(Wrapper):
    """Checks the first ``reset`` and ``step`` results of an env and explains mistakes.

    Type errors in the return values raise `TypeError` (they would corrupt a rollout);
    softer issues (non-text observation, missing ``success`` on a final step) warn once.
    After the first checked step it is a pure pass-through.
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
            check_step_return(self.env, result)
        if not self._checked_final and (result[2] or result[3]):
            self._checked_final = True
            if result[2] and "success" not in result[4]:
                _warn(
                    f"{self.env} ended an episode (terminated=True) without info['success']; "
                    "set it on the final step so success is never inferred from reward"
                )
        return result
