"""Envs on a Ray cluster: `RayVectorEnv` and the rollout engine's `RayEnvPool` (extra ``gem-core[ray]``).

Nothing here imports Ray until a class is built: ``import gem_core.distributed`` is
cheap, and without Ray the constructors raise `DependencyNotInstalled` naming
``pip install "gem-core[ray]"``. See docs/distributed.md.
"""

from __future__ import annotations

from gem_core import _lazy

__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "RayVectorEnv": "gem_core.distributed.vector",
        "RayEnvPool": "gem_core.distributed.pool",
        "RemoteEnv": "gem_core.distributed.pool",
        "RayConnectionError": "gem_core.distributed._ray",
        "connect": "gem_core.distributed._ray",
        "import_ray": "gem_core.distributed._ray",
        "RAY_LOOPBACK_ENV": "gem_core.distributed._ray",
    },
)
