"""A generic env whose reset/step are injectable functions, so wrapper and vector tests stay short."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gem_core import Env

__all__ = ["GenericTestEnv", "counting_step", "default_reset", "raising_step"]


def default_reset(env: GenericTestEnv, seed: int | None, options: dict[str, Any] | None):
    """Observation ``"start <n>"`` with n drawn from the env's own RNG."""
    env.t = 0
    return f"start {env.rng.randint(0, 10**6)}", {}


def counting_step(env: GenericTestEnv, action: Any):
    """Observation ``"obs <t>"``, reward ``t``, terminates after ``env.episode_len`` steps."""
    env.t += 1
    done = env.t >= env.episode_len
    info: dict[str, Any] = {"action": action}
    if done:
        info["success"] = True
    return f"obs {env.t}", float(env.t), done, False, info


def raising_step(env: GenericTestEnv, action: Any):
    """Raises when the action is ``"boom"``; otherwise counts like `counting_step`."""
    if action == "boom":
        raise ValueError("boom requested")
    return counting_step(env, action)


def short_step(env: GenericTestEnv, action: Any):
    """Returns four values instead of five when the action is ``"short"``, a generator of the
    five for ``"lazy"``; else counts."""
    if action == "short":
        return "obs", 0.0, False, {}
    if action == "lazy":
        return (x for x in counting_step(env, action))
    return counting_step(env, action)


class GenericTestEnv(Env[str, Any]):
    """An env built from functions: ``GenericTestEnv(step_fn=..., episode_len=3)``.

    ``reset_fn(env, seed, options) -> (obs, info)`` and ``step_fn(env, action) -> 5-tuple``;
    ``super().reset(seed=seed)`` is called before ``reset_fn``.
    """

    def __init__(
        self,
        reset_fn: Callable[..., tuple[Any, dict]] = default_reset,
        step_fn: Callable[..., tuple] = counting_step,
        episode_len: int = 3,
        close_fn: Callable[[GenericTestEnv], None] | None = None,
    ):
        self.reset_fn = reset_fn
        self.step_fn = step_fn
        self.episode_len = episode_len
        self.close_fn = close_fn
        self.t = 0
        self.closed = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return self.reset_fn(self, seed, options)

    def step(self, action: Any):
        return self.step_fn(self, action)

    def close(self) -> None:
        self.closed += 1
        if self.close_fn is not None:
            self.close_fn(self)

    def sample_random_action(self) -> str:
        return f"a{self.rng.randint(0, 9)}"
