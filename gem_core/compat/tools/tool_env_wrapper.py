"""The reference ``ToolEnvWrapper(env, tools, tool_reward, tool_success_reward, max_tool_uses)`` on gem_core's."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from gem_core.compat.core import ForwardingMixin, reset_options
from gem_core.compat.tools.base_tool import as_tool
from gem_core.core import Env
from gem_core.tools.wrapper import ToolEnvWrapper as _NativeToolEnvWrapper

__all__ = ["ToolEnvWrapper"]


class ToolEnvWrapper(ForwardingMixin, _NativeToolEnvWrapper):
    """gem_core's `gem_core.tools.ToolEnvWrapper` with the reference arguments and info keys.

    Rewards of a tool turn, as in the reference: ``tool_reward`` for a call that was
    found, plus ``tool_success_reward`` when it ran without error; with a non-zero
    ``tool_execute_error_reward`` a failed call pays that instead. After
    ``max_tool_uses`` calls (``None``: no limit) actions go to the task env unchanged.

    ``info`` keys added to gem_core's (``use_tool``, ``tool_name``, ``tool_error``,
    ``tool_uses`` ...): ``tool_use_counter`` and ``tool_success_counter`` on every
    reset and step; ``prev_ep_tool_use_counter`` and ``prev_ep_tool_success_counter``
    (the previous episode's) on reset; ``parsed_action`` (the action up to the end of
    the call) and ``tool_type`` on tool turns. ``use_tool`` is True on tool turns only
    (gem-llm 0.1.0 also set it on task turns; fixed in its repository since).

    Tools: gem_core `Tool`\\ s (the compat `PythonCodeTool` / `SearchTool` among them) or
    reference-style objects (``execute_action``, ``instruction_string``), adapted by
    `gem_core.compat.tools.base_tool.LegacyTool`.
    """

    def __init__(
        self,
        env: Env,
        tools: Sequence[Any],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        max_tool_uses: int | None = 10,
        tool_execute_error_reward: float = 0.0,
    ):
        if not isinstance(tools, (list, tuple)):
            tools = [tools]
        native_tools = [as_tool(t) for t in tools]
        error_reward = tool_execute_error_reward if tool_execute_error_reward else tool_reward
        super().__init__(
            env,
            native_tools,
            max_tool_uses=sys.maxsize if max_tool_uses is None else max_tool_uses,
            tool_reward=float(tool_reward) + float(tool_success_reward),
            tool_error_reward=float(error_reward),
            max_refusals=0,
        )
        self.reference_tools = list(tools)
        self.tool_success_reward = float(tool_success_reward)
        self.tool_execute_error_reward = float(tool_execute_error_reward)
        self.tool_use_counter = 0
        self.tool_success_counter = 0
        self._found: Any = None

    def _find_call(self, action: str):
        found = super()._find_call(action)
        self._found = found
        return found

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any):  # type: ignore[override]
        prev_uses, prev_success = self.tool_use_counter, self.tool_success_counter
        obs, info = super().reset(seed=seed, options=reset_options(options, kwargs))
        self.tool_use_counter = 0
        self.tool_success_counter = 0
        info.update(
            tool_use_counter=0,
            prev_ep_tool_use_counter=prev_uses,
            tool_success_counter=0,
            prev_ep_tool_success_counter=prev_success,
        )
        return obs, info

    def step(self, action: Any, verbose: bool = False):  # type: ignore[override]
        self._found = None
        obs, reward, terminated, truncated, info = super().step(action)
        if info.get("use_tool"):
            tool, call = self._found
            if not info.get("tool_error"):
                self.tool_success_counter += 1
            end = call.span[1] if hasattr(call, "span") else len(action)
            info["parsed_action"] = action[:end]
            info["tool_type"] = getattr(tool, "tool_type", tool.name)
            if verbose:
                print(f"Tool {tool.name}: call {self.tool_uses}, error={info.get('tool_error')}")
        self.tool_use_counter = self.tool_uses
        info["tool_use_counter"] = self.tool_use_counter
        info["tool_success_counter"] = self.tool_success_counter
        return obs, reward, terminated, truncated, info
