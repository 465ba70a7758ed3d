"""MCP task envs (``mcp:*``): shop tasks solved through a shipped SQLite MCP server.

- ``server.py``: the MCP server (official SDK) over one SQLite file;
- ``data/seed.sql``: the database every episode starts from;
- ``tasks.py``: the task catalog, graders, reference solutions and near misses;
- ``env.py``: `MCPTaskEnv`, which owns the server and resets its database per episode.

Names load lazily: importing this package does not import the MCP SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MCPTaskEnv", "TASKS", "TASK_NAMES", "Task", "TaskInstance", "play_script"]

_LAZY = {
    "MCPTaskEnv": "gem_core.envs.mcp_tasks.env",
    "TASKS": "gem_core.envs.mcp_tasks.tasks",
    "TASK_NAMES": "gem_core.envs.mcp_tasks.tasks",
    "Task": "gem_core.envs.mcp_tasks.tasks",
    "TaskInstance": "gem_core.envs.mcp_tasks.tasks",
    "play_script": "gem_core.envs.mcp_tasks.tasks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gem_core.envs.mcp_tasks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
