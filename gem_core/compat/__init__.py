"""The reference GEM's API (PyPI ``gem-llm``, ``import gem``) on gem_core's envs.

Porting is an import change: ``import gem_core.compat as gem`` and the same
``from gem.X import Y`` lines as ``from gem_core.compat.X import Y``. Each piece is a thin
translation onto gem_core (see MIGRATING.md for the table and the semantic
differences). Not imported by ``import gem_core``. Without gem-llm installed,
`install_as_gem` makes ``import gem`` itself resolve here (`gem_core.compat.alias`).
"""

from __future__ import annotations

from gem_core.compat._not_ported import NotPorted
from gem_core.compat.alias import install_as_gem, uninstall_as_gem
from gem_core.compat.core import CompatEnv, Env, EnvWrapper
from gem_core.compat.envs.registration import make, make_vec, print_envs, register

__all__ = [
    "Env",
    "EnvWrapper",
    "CompatEnv",
    "make",
    "make_vec",
    "print_envs",
    "register",
    "install_as_gem",
    "uninstall_as_gem",
    "NotPorted",
]
