"""`ToolEnvWrapper`: lets an agent call tools between the turns of a task env."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gem_core.core import Env, Wrapper
from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.tools.base import Tool, ToolCall, ToolResult

__all__ = ["ToolEnvWrapper"]


class ToolEnvWrapper(Wrapper):
    """Runs tool calls found in actions; everything else goes to the task env.

    On each `step`, the tools are tried in list order and the **first** one whose
    `Tool.parse` finds a call runs it (a later tool never overrides an earlier match).

    Routing among tools that read the same call format (several `MCPTool` servers all
    read ``<tool_call>``): a tool with a ``handles(call)`` method may decline a call it
    parsed (``False``: not mine; ``None``: cannot tell, e.g. its server is down). The
    call then goes to the first tool that parsed it and answers ``True`` (or has no
    ``handles``); failing that, to the first that answered ``None`` (which reports why it
    cannot run it); if every one declined, the turn is a failed tool call whose
    observation names the unknown tool and lists each tool's ``list_tools()`` names
    (``tool_info = {"reason": "unknown_tool"}``).
    A tool turn returns the tool's observation, reward ``tool_reward`` (or
    ``tool_error_reward`` for a failed call), ``terminated = truncated = False``, and does
    **not** step the task env: its turn counter and turn budget are untouched. Turns
    without a tool call, and non-string actions, go to the task env unchanged.

    Tool-use limit (per episode): every executed call counts, failed ones included. The
    observation of the ``max_tool_uses``-th call ends with `LIMIT_MESSAGE`. After that a
    turn holding a tool call is not run: the first ``max_refusals`` such turns are no-ops
    (no task turn, reward 0.0) whose observation is `REFUSAL_MESSAGE`; later ones go to
    the task env as ordinary actions (which grades or rejects them). So an episode has
    at most ``max_tool_uses + max_refusals`` tool-call turns besides its task turns and
    always ends when the task env ends.

    Malformed and hostile calls: what a tool cannot read is that tool's business — the
    shipped tools parse any string in linear time and turn a malformed call (bad JSON,
    JSON nested deeper than 64 levels or longer than 1 MB, an empty block ...) into an
    error observation from `Tool.execute`. A tool whose `parse` or `execute` raises
    anyway (e.g. a user's own tool) does not crash `step`: the turn is a failed tool call
    (``tool_error=True``, reward ``tool_error_reward``, counted against
    ``max_tool_uses``) whose observation is ``"Tool 'NAME' could not read the action:
    TYPE: MESSAGE"`` (parse) or ``"Tool 'NAME' failed: TYPE: MESSAGE"`` (execute), the
    message clipped to 1,000 characters, with ``tool_info = {"exception": TYPE,
    "stage": "parse" | "execute"}``. A raising parse stops the search: later tools are
    not tried on that action.

    Observation: at reset, the task's observation followed by the tools' instructions
    (appended to ``obs["text"]`` when the observation is a dict with text).

    ``info`` on every step: ``use_tool`` (a tool ran this turn), ``tool_name`` (the tool
    whose call was found, else ``None``), ``tool_error`` (that call failed),
    ``tool_uses`` (calls run so far this episode); on tool turns also ``tool_info`` (the
    `ToolResult.info`); on refused turns ``tool_refused=True``; on task turns the task
    env's own info (``success``, ``turn`` ...).

    Args:
        env: the task env.
        tools: the tools, in priority order.
        max_tool_uses: tool calls run per episode (>= 0).
        tool_reward: reward of a tool turn. Default 0.0: shaping that pays for tool use
            more than solving the task invites reward hacking.
        tool_error_reward: reward of a failed tool call (default: ``tool_reward``).
        max_refusals: over-limit tool-call turns answered with `REFUSAL_MESSAGE` before
            such turns are passed to the task env (>= 0).
        close_tools: `close` also closes the tools (set False when tools are shared).
    """

    LIMIT_MESSAGE = (
        "You have reached the maximum number of tool uses ({limit}). Give your final answer "
        "now, without calling tools."
    )
    REFUSAL_MESSAGE = (
        "Tool call not run: the limit of {limit} tool uses for this episode is reached. "
        "Give your final answer now, without calling tools."
    )

    def __init__(
        self,
        env: Env,
        tools: Sequence[Tool],
        *,
        max_tool_uses: int = 10,
        tool_reward: float = 0.0,
        tool_error_reward: float | None = None,
        max_refusals: int = 1,
        close_tools: bool = True,
    ):
        super().__init__(env)
        if isinstance(tools, Tool):
            tools = [tools]
        tools = list(tools)
        for tool in tools:
            if not isinstance(tool, Tool):
                raise InvalidArgumentType(
                    f"ToolEnvWrapper expects gem_core.tools.Tool instances, got "
                    f"{type(tool).__name__}; subclass gem_core.tools.Tool"
                )
        for name, value in (("max_tool_uses", max_tool_uses), ("max_refusals", max_refusals)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be an int >= 0, got {value!r}")
        self.tools: list[Tool] = tools
        self.max_tool_uses = max_tool_uses
        self.tool_reward = float(tool_reward)
        self.tool_error_reward = (
            self.tool_reward if tool_error_reward is None else float(tool_error_reward)
        )
        self.max_refusals = max_refusals
        self.close_tools = close_tools
        self.tool_uses = 0
        self.refusals = 0
        self._live = False  # between reset and the task env's last step

    def tool_instructions(self) -> str:
        """The tools' instructions, as appended to the reset observation."""
        parts = [
            text.strip()
            for text in (tool.instruction() for tool in self.tools)
            if text and text.strip()
        ]
        if len(parts) > 1:
            return "Available tools:\n\n" + "\n\n".join(parts)
        return "\n\n".join(parts)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        for tool in self.tools:
            tool.reset()
        obs, info = self.env.reset(seed=seed, options=options)
        self.tool_uses = 0
        self.refusals = 0
        self._live = True
        extra = self.tool_instructions()
        if extra:
            if isinstance(obs, str):
                obs = f"{obs}\n\n{extra}"
            elif isinstance(obs, dict) and isinstance(obs.get("text"), str):
                obs = {**obs, "text": f"{obs['text']}\n\n{extra}"}
        info = dict(info)
        info.update(use_tool=False, tool_name=None, tool_error=False, tool_uses=0)
        return obs, info

    def step(self, action: Any):
        found = self._find_call(action) if self._live and isinstance(action, str) else None
        if found is not None:
            tool, call = found
            if self.tool_uses < self.max_tool_uses:
                return self._run_tool(tool, call)
            if self.refusals < self.max_refusals:
                self.refusals += 1
                info = {
                    "use_tool": False,
                    "tool_name": tool.name,
                    "tool_error": False,
                    "tool_refused": True,
                    "tool_uses": self.tool_uses,
                }
                return (
                    self.REFUSAL_MESSAGE.format(limit=self.max_tool_uses),
                    0.0,
                    False,
                    False,
                    info,
                )
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self._live = False
        info = dict(info)
        info.update(
            use_tool=False,
            tool_name=found[0].name if found is not None else None,
            tool_error=False,
            tool_uses=self.tool_uses,
        )
        return obs, reward, terminated, truncated, info

    def _find_call(self, action: str) -> tuple[Tool, ToolCall | Exception] | None:
        """The tool that runs the action's call (see the class docstring on routing), with
        the call, or with what its parse (or an unroutable call) raised."""
        declined: list[tuple[Tool, ToolCall]] = []
        unsure: tuple[Tool, ToolCall] | None = None
        for tool in self.tools:
            try:
                call = tool.parse(action)
            except Exception as exc:  # noqa: BLE001 - a parser bug is the tool's error turn
                if declined or unsure:
                    break  # an earlier tool parsed it: the call is theirs to answer
                return tool, exc
            if call is None:
                continue
            handles = getattr(tool, "handles", None)
            if handles is None:
                return tool, call
            try:
                mine = handles(call)
            except Exception:  # noqa: BLE001 - a routing bug: let this tool answer it
                mine = None
            if mine is True:
                return tool, call
            if mine is None:
                unsure = unsure or (tool, call)
            else:
                declined.append((tool, call))
        if unsure is not None:
            return unsure
        if declined:
            return declined[0][0], _UnknownTool(declined[0][1], [t for t, _ in declined])
        return None

    def _run_tool(self, tool: Tool, call: ToolCall | Exception):
        self.tool_uses += 1
        if isinstance(call, _UnknownTool):
            result = call.result()
        elif isinstance(call, Exception):
            result = _exception_result(tool, "could not read the action", call, "parse")
        else:
            try:
                result = tool.execute(call)
            except Exception as exc:  # noqa: BLE001 - a tool bug must not end the rollout
                result = _exception_result(tool, "failed", exc, "execute")
        obs = result.observation
        if self.tool_uses >= self.max_tool_uses:
            obs = f"{obs}\n\n{self.LIMIT_MESSAGE.format(limit=self.max_tool_uses)}"
        reward = self.tool_error_reward if result.error else self.tool_reward
        info = {
            "use_tool": True,
            "tool_name": tool.name,
            "tool_error": bool(result.error),
            "tool_uses": self.tool_uses,
            "tool_info": result.info,
        }
        return obs, reward, False, False, info

    def close(self) -> None:
        """Close the tools (unless ``close_tools=False``) and the env. Safe twice."""
        error: BaseException | None = None
        for tool in self.tools if self.close_tools else []:
            try:
                tool.close()
            except Exception as exc:  # noqa: BLE001 - close the rest, then re-raise
                error = error or exc
        self.env.close()
        if error is not None:
            raise error


_MAX_EXCEPTION_CHARS = 1_000


class _UnknownTool(Exception):
    """A call every tool that parsed it declined (no server has the tool it names)."""

    def __init__(self, call: ToolCall, tools: list[Tool]):
        super().__init__("unknown tool")
        self.call = call
        self.tools = tools

    def result(self) -> ToolResult:
        payload = self.call.payload if isinstance(self.call.payload, dict) else {}
        available = []
        for tool in self.tools:
            try:
                names = sorted(str(t["name"]) for t in tool.list_tools())  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - listing is best effort here
                names = []
            available.append(f"{', '.join(names) or '(none)'} (on {tool.name})")
        return ToolResult(
            f"Tool error: unknown tool {str(payload.get('name'))[:200]!r}. Available tools: "
            + "; ".join(available) + ".",
            error=True,
            info={"reason": "unknown_tool"},
        )


def _exception_result(tool: Tool, what: str, exc: Exception, stage: str) -> ToolResult:
    """The error observation for a tool method that raised (its message clipped)."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not escape either
        message = "(the exception's message could not be rendered)"
    if len(message) > _MAX_EXCEPTION_CHARS:
        message = message[:_MAX_EXCEPTION_CHARS] + f"... [{len(message) - _MAX_EXCEPTION_CHARS} characters truncated]"
    return ToolResult(
        f"Tool {tool.name!r} {what}: {type(exc).__name__}: {message}",
        error=True,
        info={"exception": type(exc).__name__, "stage": stage},
    )
