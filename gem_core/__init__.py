"""GEM core: a small, fast, safe environment core for multi-turn RL with LLM agents."""

from __future__ import annotations

from gem_core import _lazy, errors
from gem_core import envs as _builtin_envs  # noqa: F401  (registers the catalog)
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
    "use_env_modules",
    "AutoresetMode",
    "errors",
    "__version__",
]

__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__,
    {
        "make_vec": "gem_core.vector",
        "AutoresetMode": "gem_core.vector",
        "check_env": "gem_core.checker",
        "use_env_modules": "gem_core.env_modules",
    },
)
