"""Reference ``gem.vector.async_vector_env``: `AsyncVectorEnv` (`gem_core.compat.vector.vector_env`).

The reference's thread-pool helper ``step_reset_env`` is not ported: gem_core's async
vector env steps and resets its envs in worker processes.
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders
from gem_core.compat.vector.vector_env import AsyncVectorEnv

__all__ = ["AsyncVectorEnv", "step_reset_env"]

(step_reset_env,) = placeholders(
    __name__,
    ("step_reset_env",),
    instead="gem_core.compat.vector.AsyncVectorEnv.step (autoreset included)",
    why="the reference's per-env step-then-reset helper for its thread pool",
)
