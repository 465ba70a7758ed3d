"""Terminal tasks: shell tasks solved with bash commands in a sandboxed workspace.

`TerminalEnv` runs one task (``terminal:<task>-v0``) or samples one per reset
(``terminal:Mixed-v0``); the shipped tasks live in ``tasks/<name>/`` as
``instruction.md``, ``setup.sh``, ``test.sh``, ``solution.sh`` and ``task.json``.
"""

from __future__ import annotations

from gem_core.envs.terminal.env import FORMAT_HINT, RANDOM_ACTIONS, TerminalEnv, parse_action
from gem_core.envs.terminal.task import (
    SANDBOX_PATH,
    TASK_FILES,
    TASKS_DIR,
    TerminalTask,
    load_task,
    task_names,
)

__all__ = [
    "TerminalEnv",
    "TerminalTask",
    "parse_action",
    "load_task",
    "task_names",
    "FORMAT_HINT",
    "RANDOM_ACTIONS",
    "TASKS_DIR",
    "TASK_FILES",
    "SANDBOX_PATH",
]
