"""Reference ``gem.envs.reasoning_gym``: ``ReasoningGymEnv(name, size=500, seed=42)`` on gem_core's (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["ReasoningGymEnv"]

ReasoningGymEnv = env_class(
    "ReasoningGymEnv", __name__, "gem_core.envs.reasoning_gym:ReasoningGymEnv", ("name", "size", "seed")
)
