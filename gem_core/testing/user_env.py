"""A user's own env module, outside every installed package, for tests of env modules.

`write_user_env_module` writes a module that registers a small multi-turn env with known
per-turn rewards (turn ``t`` pays ``t``, three turns, any action) under a fresh id; adapter
tests name it through ``--env-module`` / `gem_core.use_env_modules` and check that the
trainer's worker processes can play it, and that a registration in the driver alone gives
the lookup's clear error there. `write_user_env_package` writes the same module as an
installed distribution (a ``.dist-info`` with a ``gem_core.envs`` entry point, what ``pip
install`` of a user's package leaves), the recommended way: any process whose path holds
the folder finds the env through the entry point, with no env-module option.
"""

from __future__ import annotations

import itertools
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = ["UserEnvModule", "write_user_env_module", "write_user_env_package", "USER_ENV_REWARDS"]

USER_ENV_REWARDS = (1.0, 2.0, 3.0)
"""The per-turn rewards of every episode of the written env."""

_SOURCE = textwrap.dedent(
    '''
    """A tiny multi-turn env with known per-turn rewards (turn t pays t), written by a test."""
    import gem_core
    from gem_core import Env


    class TurnBonus(Env):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return "Turn 0. Say anything.", {{}}

        def step(self, action):
            self.t += 1
            done = self.t >= 3
            return f"Turn {{self.t}}. Say anything.", float(self.t), done, False, {{"success": done}}


    def register_envs():
        if {env_id!r} not in dict.keys(gem_core.registry):
            gem_core.register({env_id!r}, TurnBonus, max_turns=5)


    register_envs()
    '''
)

_count = itertools.count()


@dataclass(frozen=True)
class UserEnvModule:
    """Where the module is and what it registers."""

    folder: Path
    """The folder holding the module (on no path until a test puts it there)."""
    name: str
    """The module's import name."""
    env_id: str
    """The id it registers."""

    @property
    def path(self) -> Path:
        """The module's file."""
        return self.folder / f"{self.name}.py"


def write_user_env_module(folder: str | os.PathLike[str]) -> UserEnvModule:
    """Write the module into ``folder`` (created) under a name and id unique to this call."""
    n = next(_count)
    name = f"user_turn_bonus_{os.getpid()}_{n}"
    env_id = f"userenv:TurnBonus{os.getpid()}x{n}-v0"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(_SOURCE.format(env_id=env_id))
    return UserEnvModule(folder, name, env_id)


def write_user_env_package(folder: str | os.PathLike[str]) -> UserEnvModule:
    """Write the module into ``folder`` as an installed distribution: the module and a
    ``<name>-0.1.dist-info`` (``METADATA``, ``RECORD`` and an ``entry_points.txt`` naming its
    ``register_envs`` in the ``gem_core.envs`` group), as ``pip install --target folder`` of a
    user's package would leave it. With ``folder`` on a process's path, `gem_core.make` of the
    env id loads it through the entry point."""
    mod = write_user_env_module(folder)
    info = mod.folder / f"{mod.name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {mod.name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[gem_core.envs]\n{mod.name} = {mod.name}:register_envs\n")
    (info / "RECORD").write_text(f"{mod.name}.py,,\n{info.name}/METADATA,,\n{info.name}/entry_points.txt,,\n")
    return mod
