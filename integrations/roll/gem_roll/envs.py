"""gem_core's env ids in gem-llm's registry, so ROLL's ``gem.make(env_id=env_type)`` builds them.

`register_envs` wraps `gem_core.compat.gem_llm.register_gem_core_envs` once per process.
The env managers of `gem_roll.env_manager` call it on construction (ROLL builds them in its
env worker processes), so a ROLL YAML only names ``env_type: game:Sudoku-v0-easy`` and
``env_manager_cls: gem_roll.env_manager.GemStepEnvManager``.
"""

from __future__ import annotations

import threading

__all__ = ["register_envs"]

_LOCK = threading.Lock()
_DONE: dict[str, list[str]] = {}


def register_envs(prefix: str = "") -> list[str]:
    """Register every gem_core id (and gem-llm 0.0.4's plain ``game:*-v0`` aliases) into ``gem``.

    Idempotent per ``prefix``. gem-llm's own registration of the same id is replaced (the
    point: ``gem.make`` then builds gem_core's env); use a ``prefix`` such as
    ``"gem_core/"`` to keep gem-llm's envs under their ids.

    Returns:
        The ids registered.

    Raises:
        gem_core.errors.DependencyNotInstalled: gem-llm (``import gem``) is not installed.
    """
    with _LOCK:
        if prefix not in _DONE:
            from gem_core.compat.gem_llm import register_gem_core_envs

            _DONE[prefix] = register_gem_core_envs(prefix=prefix)
        return list(_DONE[prefix])
