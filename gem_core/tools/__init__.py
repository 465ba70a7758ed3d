"""Tools for agents (Python sandbox, search, MCP) and the wrapper that lets an env use them.

Names load lazily, so ``import gem_core.tools`` stays cheap and optional dependencies (the
MCP SDK) are only needed by the tool that uses them.
"""

from __future__ import annotations

from gem_core import _lazy
from gem_core.tools.base import Tool, ToolCall, ToolResult

__all__ = ["Tool", "ToolCall", "ToolResult", "PythonCodeTool", "SearchTool", "MCPTool", "ToolEnvWrapper"]

__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__,
    {
        "PythonCodeTool": "gem_core.tools.python",
        "SearchTool": "gem_core.tools.search",
        "MCPTool": "gem_core.tools.mcp",
        "ToolEnvWrapper": "gem_core.tools.wrapper",
    },
)
