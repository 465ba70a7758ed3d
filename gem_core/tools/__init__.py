"""Tools for agents (Python sandbox, search, MCP) and the wrapper that lets an env use them.

Names load lazily, so ``import gem_core.tools`` stays cheap and optional dependencies (the
MCP SDK) are only needed by the tool that uses them.
"""

from __future__ import annotations

import importlib
from typing import Any

from gem_core.tools.base import Tool, ToolCall, ToolResult

__all__ = ["Tool", "ToolCall", "ToolResult", "PythonCodeTool", "SearchTool", "MCPTool", "ToolEnvWrapper"]

_LAZY = {
    "PythonCodeTool": "gem_core.tools.python",
    "SearchTool": "gem_core.tools.search",
    "MCPTool": "gem_core.tools.mcp",
    "ToolEnvWrapper": "gem_core.tools.wrapper",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gem_core.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
