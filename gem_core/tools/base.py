"""The tool interface: a tool finds its call in an action, runs it and returns an observation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gem_core._closing import Closing

__all__ = ["Tool", "ToolCall", "ToolResult"]


@dataclass(slots=True)
class ToolCall:
    """A tool call found in an agent action.

    Attributes:
        tool: the name of the tool that parsed it.
        payload: what the tool needs to run it (code, a query, a name + arguments ...).
        span: ``(start, end)`` character offsets of the call in the action.
        raw: the call's text as written by the agent.
    """

    tool: str
    payload: Any
    span: tuple[int, int] = (0, 0)
    raw: str = ""


@dataclass(slots=True)
class ToolResult:
    """What running a tool call produced.

    Attributes:
        observation: the text shown to the agent (errors included: a tool never raises
            into the rollout for a problem with the call itself).
        error: the call failed (bad arguments, timeout, crashed server, ...).
        info: extra facts for logging (exit code, duration, ...).
    """

    observation: str
    error: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class Tool(Closing):
    """Base class of tools used through `gem_core.tools.ToolEnvWrapper`.

    A subclass sets ``name`` and implements `parse` and `execute`; it may override
    `instruction` (how to call it, shown to the agent), `reset` (per-episode state, e.g. a
    persistent Python session) and `close` (release processes and sockets; safe twice).
    `parse` must never raise on any string; `execute` returns errors as observations.
    """

    name: ClassVar[str] = "tool"

    def parse(self, action: str) -> ToolCall | None:
        """The call in ``action`` (the earliest complete one), or ``None``."""
        raise NotImplementedError

    def execute(self, call: ToolCall) -> ToolResult:
        """Run a parsed call."""
        raise NotImplementedError

    def instruction(self) -> str:
        """How the agent calls this tool (added to the env's instruction)."""
        return ""

    def reset(self) -> None:
        """Start a new episode (drop per-episode state)."""

    def close(self) -> None:
        """Release resources. Safe to call more than once."""
