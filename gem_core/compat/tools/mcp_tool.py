"""Reference ``gem.tools.mcp_tool``: `is_timeout_error`; the reference's ``MCPTool`` is not ported.

The reference's ``MCPTool(config, validate_on_init=...)`` takes a FastMCP client
configuration; gem_core's `gem_core.tools.mcp.MCPTool` (the official MCP SDK: stdio or
streamable-HTTP servers, one session per tool, timeouts and output caps) is built from a
server command or URL instead, and works in `gem_core.compat.tools.tool_env_wrapper.ToolEnvWrapper`.
"""

from __future__ import annotations

import asyncio
import logging

from gem_core.compat._not_ported import placeholders

__all__ = ["MCPTool", "is_timeout_error", "logger"]

logger = logging.getLogger(__name__)

(MCPTool,) = placeholders(
    __name__,
    ("MCPTool",),
    instead="gem_core.tools.mcp.MCPTool (server command or URL; see its docs)",
    why="the reference's MCPTool is configured for the third-party fastmcp client",
)

_TIMEOUT_WORDS = ("etimedout", "econnreset", "timeout", "timed out")


def is_timeout_error(error: BaseException) -> bool:
    """Whether ``error`` is a timeout: a ``TimeoutError`` or a message that says so."""
    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        return True
    text = str(error).lower()
    return any(word in text for word in _TIMEOUT_WORDS)
