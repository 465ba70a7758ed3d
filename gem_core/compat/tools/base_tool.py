"""The reference tool protocol (``gem.tools.base_tool.BaseTool``) as a gem_core `Tool`, and `LegacyTool`.

A reference tool has ``tool_type``, ``instruction_string()`` and
``execute_action(action) -> (is_valid, has_error, observation, parsed_action)``; gem_core's
`gem_core.tools.ToolEnvWrapper` drives ``parse``/``execute``. `BaseTool` maps one onto
the other, so a reference-style subclass works in gem_core's tool wrapper.
"""

from __future__ import annotations

from typing import Any

from gem_core.errors import InvalidArgumentType
from gem_core.tools.base import Tool, ToolCall, ToolResult

__all__ = ["BaseTool", "LegacyTool", "ReferenceMethods", "as_tool"]


class BaseTool(Tool):
    """Base class of reference-style tools (implement `instruction_string` and `execute_action`).

    How the gem_core protocol is derived: when the tool has the reference's
    ``_parse_action(action)`` (a tuple whose last item is ``is_valid``), `parse` calls
    only that and `execute` runs ``execute_action``; otherwise `parse` already runs
    ``execute_action`` (the only way to know whether the action holds a call) and
    `execute` returns its result. ``name`` is ``tool_type``.
    """

    tool_type: str = "base"

    def __init__(self, num_workers: int = 1):
        self.num_workers = num_workers

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__dict__.get("tool_type", getattr(cls, "tool_type", "base"))  # type: ignore[misc]

    # --- the reference protocol (subclasses implement) -----------------------------
    def instruction_string(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement instruction_string()")

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        raise NotImplementedError(f"{type(self).__name__} must implement execute_action()")

    # --- the gem_core protocol, derived ----------------------------------------------
    def _reference(self) -> Any:
        return self

    def parse(self, action: str) -> ToolCall | None:
        ref = self._reference()
        parse_only = getattr(ref, "_parse_action", None)
        if callable(parse_only):
            parsed = parse_only(action)
            if not (isinstance(parsed, tuple) and parsed and parsed[-1]):
                return None
            text = parsed[-2] if len(parsed) >= 2 and isinstance(parsed[-2], str) else action
            return ToolCall(self.name, payload=("run", action), span=(0, len(text)), raw=text)
        is_valid, has_error, observation, parsed_action = ref.execute_action(action)
        if not is_valid:
            return None
        text = parsed_action if isinstance(parsed_action, str) else action
        return ToolCall(self.name, payload=("done", bool(has_error), observation), span=(0, len(text)), raw=text)

    def execute(self, call: ToolCall) -> ToolResult:
        payload = call.payload
        if payload[0] == "run":
            _, has_error, observation, _ = self._reference().execute_action(payload[1])
        else:
            _, has_error, observation = payload
        return ToolResult(observation if isinstance(observation, str) else str(observation), error=bool(has_error))

    def instruction(self) -> str:
        return self._reference().instruction_string()


class LegacyTool(BaseTool):
    """Any object with the reference protocol (gem-llm's tools, ROLL's) as a gem_core `Tool`.

    Args:
        tool: the reference-style tool; ``close()`` is forwarded when it has one.
    """

    def __init__(self, tool: Any):
        self.tool = tool
        self.name = str(getattr(tool, "tool_type", type(tool).__name__))  # type: ignore[misc]
        self.tool_type = self.name

    def _reference(self) -> Any:
        return self.tool

    def close(self) -> None:
        close = getattr(self.tool, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return f"LegacyTool({self.tool!r})"


class ReferenceMethods:
    """The reference's ``instruction_string()`` and ``execute_action(action)`` on a gem_core
    `Tool` (mix in before the tool class): the compat `PythonCodeTool` and `SearchTool`."""

    #: ``parsed_action`` when ``action`` holds no call: the whole action, or ``""``.
    unparsed_is_action: bool = True

    def instruction_string(self) -> str:
        return self.instruction()  # type: ignore[attr-defined]

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        """Run the first complete call: ``(found, failed, observation, text up to its end)``."""
        call = self.parse(action)  # type: ignore[attr-defined]
        if call is None:
            return False, True, "", action if self.unparsed_is_action else ""
        result = self.execute(call)  # type: ignore[attr-defined]
        return True, bool(result.error), result.observation, action[: call.span[1]]


def as_tool(tool: Any) -> Tool:
    """``tool`` itself when it is a gem_core `Tool`, else a `LegacyTool` around it.

    Raises:
        TypeError: neither a gem_core Tool nor an object with ``execute_action`` and
            ``instruction_string``.
    """
    if isinstance(tool, Tool):
        return tool
    if callable(getattr(tool, "execute_action", None)) and callable(getattr(tool, "instruction_string", None)):
        return LegacyTool(tool)
    raise InvalidArgumentType(
        f"expected a gem_core.tools.Tool or a reference-style tool with execute_action() and "
        f"instruction_string(), got {type(tool).__name__}"
    )
