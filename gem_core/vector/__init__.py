"""Vector envs: many sub-envs stepped at once, in-process or in worker processes."""

from __future__ import annotations

from gem_core.vector.async_vector_env import AsyncState, AsyncVectorEnv
from gem_core.vector.make import make_vec
from gem_core.vector.mixture import Mixture, MixtureEnv
from gem_core.vector.sync_vector_env import SyncVectorEnv
from gem_core.vector.vector_env import AutoresetMode, VectorEnv

__all__ = [
    "VectorEnv",
    "SyncVectorEnv",
    "AsyncVectorEnv",
    "AsyncState",
    "AutoresetMode",
    "make_vec",
    "Mixture",
    "MixtureEnv",
]
