"""GEM core: a small, fast, safe environment core for multi-turn RL with LLM agents."""

from __future__ import annotations

from typing import Any

from gem_core import envs as _builtin_envs  # noqa: F401  (registers the catalog)
from gem_core import errors
from gem_core.core import ActionWrapper, Env, ObservationWrapper, RewardWrapper, Wrapper
from gem_core.registration import EnvSpec, make, pprint_registry, register, registry, spec

__version__ = "0.1.0"

__all__ = [
    "Env",
    "Wrapper",
    "ObservationWrapper",
    "ActionWrapper",
    "RewardWrapper",
    "EnvSpec",
    "make",
    "make_vec",
    "register",
    "registry",
    "spec",
    "pprint_registry",
    "check_env",
    "AutoresetMode",
    "errors",
    "__version__",
]

_LAZY = {
    "make_vec": "gem_core.vector",
    "AutoresetMode": "gem_core.vector",
    "check_env": "gem_core.checker",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gem_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
