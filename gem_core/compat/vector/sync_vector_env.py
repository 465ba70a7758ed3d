"""Reference ``gem.vector.sync_vector_env``: `SyncVectorEnv` (`gem_core.compat.vector.vector_env`)."""

from __future__ import annotations

from gem_core.compat.vector.vector_env import SyncVectorEnv

__all__ = ["SyncVectorEnv"]
