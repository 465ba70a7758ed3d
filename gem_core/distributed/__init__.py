"""Envs on a Ray cluster: `RayVectorEnv` and the rollout engine's `RayEnvPool` (extra ``gem-core[ray]``).

Nothing here imports Ray until a class is built: ``import gem_core.distributed`` is
cheap, and without Ray the constructors raise `DependencyNotInstalled` naming
``pip install "gem-core[ray]"``. See docs/distributed.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RayVectorEnv", "RayEnvPool", "RemoteEnv", "RayConnectionError", "connect"]

_LAZY = {
    "RayVectorEnv": "gem_core.distributed.vector",
    "RayEnvPool": "gem_core.distributed.pool",
    "RemoteEnv": "gem_core.distributed.pool",
    "RayConnectionError": "gem_core.distributed._ray",
    "connect": "gem_core.distributed._ray",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gem_core.distributed' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
