"""MCP task envs (``mcp:*``): shop tasks solved through a shipped SQLite MCP server.

- ``server.py``: the MCP server (official SDK) over one SQLite file;
- ``data/seed.sql``: the database every episode starts from;
- ``tasks.py``: the task catalog, graders, reference solutions and near misses;
- ``env.py``: `MCPTaskEnv`, which owns the server and resets its database per episode.

Names load lazily: importing this package does not import the MCP SDK.
"""

from __future__ import annotations

from gem_core import _lazy

__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "MCPTaskEnv": "gem_core.envs.mcp_tasks.env",
        "TASKS": "gem_core.envs.mcp_tasks.tasks",
        "TASK_NAMES": "gem_core.envs.mcp_tasks.tasks",
        "Task": "gem_core.envs.mcp_tasks.tasks",
        "TaskInstance": "gem_core.envs.mcp_tasks.tasks",
        "play_script": "gem_core.envs.mcp_tasks.tasks",
    },
)
