"""Reference-GEM vector envs (``gem.vector``) on gem_core's vector envs."""

from __future__ import annotations

from gem_core.compat.vector.vector_env import (
    AsyncVectorEnv,
    AutoresetMode,
    SyncVectorEnv,
    VectorEnv,
)

__all__ = ["AutoresetMode", "VectorEnv", "SyncVectorEnv", "AsyncVectorEnv"]
