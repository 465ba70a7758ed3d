"""Reference ``gem.envs.terminal.docker_env``: not ported (runs tasks in Docker containers).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.terminal.TerminalEnv (sandboxed terminal tasks, no Docker: gem_core.make('terminal:...')).
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders

_WHY = 'runs tasks in Docker containers'
_INSTEAD = "gem_core.envs.terminal.TerminalEnv (sandboxed terminal tasks, no Docker: gem_core.make('terminal:...'))"

__all__ = ['ContainerConfig', 'DockerEnv', 'TaskConfig']

(ContainerConfig, DockerEnv, TaskConfig) = placeholders(
    __name__, ('ContainerConfig', 'DockerEnv', 'TaskConfig'), instead=_INSTEAD, why=_WHY
)
