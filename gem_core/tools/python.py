"""`PythonCodeTool`: runs the agent's ``<python>`` / ```` ```python ```` code in `gem_core.sandbox`."""

from __future__ import annotations

import os
import re
import textwrap
import threading
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.tools.base import Tool, ToolCall, ToolResult
from gem_core.tools.text import first_block

__all__ = ["PythonCodeTool"]

_TAG_OPEN, _TAG_CLOSE = "<python>", "</python>"
_FENCE = "```"
# The opening line of a fence, up to where the code starts: no part of it can match what
# the next part needs, so a failed try costs at most the run of blanks it looked at.
_FENCE_OPEN = re.compile(r"```[ \t]*(?:python3?|py)\b[ \t]*\n?")
_PREFIX = "Code execution result: "


class PythonCodeTool(Tool):
    """Executes Python code blocks from agent actions in an isolated, warm sandbox.

    Action format: a ``<python>...</python>`` block or a fenced ```` ```python ... ``` ````
    block; the earliest *complete* block in the action (the one that ends first) is run.
    An unclosed tag or fence is no call. `parse` never raises and runs in linear time on
    any string.

    Observation: ``"Code execution result: " + output + "\\n"``, where output is stdout,
    followed by a newline and stderr when there is any, with leading spaces and newlines
    stripped (the reference GEM's format). A timeout adds a line saying so.
    ``ToolResult.error`` is set for a non-zero exit, a timeout or a sandbox failure;
    ``info`` carries ``exit_code``, ``timed_out``, ``truncated``, ``duration_s``,
    ``isolation``.

    Persistent sessions (``persistent=True``): variables, functions and imports survive
    across calls within an episode; `reset` starts a new one. Implemented by *replay*:
    every call runs, in a fresh isolated child, the episode's earlier successful cells
    (output discarded, exceptions ignored) and then the new cell. This keeps each call
    fully isolated and needs no long-lived per-episode process, at the cost that replayed
    cells re-run their side effects and time (the timeout covers the replay too), and that
    values drawn at random may differ from the first run. Failed or timed-out cells are
    not kept.

    Args:
        timeout_s: wall-clock limit per call, in seconds.
        persistent: keep a per-episode session (see above).
        sandbox: a `gem_core.sandbox.Sandbox` to share (not closed by this tool); by
            default the tool creates its own on first use and closes it in `close`.
        keep_error_last_line: show only the last line of stderr (the reference option).
        sandbox_options: keyword arguments for the tool's own `Sandbox` (``size``,
            ``memory_mb``, ``isolation``, ...).

    Version history:
        v0: first version (sandboxed, warm pool, optional persistent session).
    """

    name = "python"

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        persistent: bool = False,
        sandbox: Any = None,
        keep_error_last_line: bool = False,
        sandbox_options: dict[str, Any] | None = None,
    ):
        if not timeout_s > 0:
            raise InvalidArgument(f"PythonCodeTool(timeout_s=...) must be positive, got {timeout_s!r}")
        if sandbox is not None and sandbox_options:
            raise InvalidArgument(
                "PythonCodeTool got both sandbox= and sandbox_options=; options only configure a "
                "sandbox the tool creates itself. Pass one of them.")
        self.timeout_s = float(timeout_s)
        self.persistent = bool(persistent)
        self.keep_error_last_line = bool(keep_error_last_line)
        self._sandbox = sandbox
        self._owns_sandbox = sandbox is None
        self._sandbox_options = dict(sandbox_options or {})
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._cells: list[str] = []
        self._closed = False

    @property
    def sandbox(self) -> Any:
        """The `Sandbox` this tool runs code in (created on first use).

        A tool that created its own sandbox and is then inherited across a fork (shared by
        ``make_vec(..., async_mode=True)`` workers, say) makes a fresh sandbox in each new
        process on first use there: a sandbox's workers serve the process that started
        them. A sandbox passed in (``sandbox=``) is the caller's and is never replaced.
        """
        if self._pid != os.getpid():  # inherited across a fork: the parent's sandbox is not ours
            self._pid = os.getpid()
            self._lock = threading.Lock()  # another thread may have held it at the fork
            if self._owns_sandbox:
                self._sandbox = None
        if self._sandbox is None:
            with self._lock:
                if self._sandbox is None:
                    if self._closed:
                        from gem_core.errors import SandboxClosed

                        raise SandboxClosed("this PythonCodeTool is closed; create a new one")
                    from gem_core.sandbox import Sandbox

                    self._sandbox = Sandbox(**self._sandbox_options)
        return self._sandbox

    def parse(self, action: str) -> ToolCall | None:
        """The earliest complete code block in ``action`` (by end position), or ``None``.

        Linear in ``len(action)``: tags and fences are found with `str.find`, the code is
        never scanned by a regular expression (an unclosed fence used to cost quadratic
        time).
        """
        if not isinstance(action, str):
            return None
        blocks = [b for b in (_tag_block(action), _fence_block(action)) if b is not None]
        if not blocks:
            return None
        start, body, body_end, end = min(blocks, key=lambda b: (b[3], b[0]))
        code = textwrap.dedent(action[body:body_end]).strip("\n")
        return ToolCall(tool=self.name, payload=code, span=(start, end), raw=action[start:end])

    def execute(self, call: ToolCall) -> ToolResult:
        """Run the call's code; errors (exceptions, limits, timeouts) come back as observations."""
        code = call.payload
        if not isinstance(code, str):
            return ToolResult(observation=f"{_PREFIX}expected Python source text, got {type(code).__name__}\n",
                              error=True)
        prelude = list(self._cells) if self.persistent else []
        result = self.sandbox.run(code, timeout=self.timeout_s, prelude=prelude)
        stderr = result.stderr
        if result.timed_out and result.sandbox_error is None:
            stderr = (stderr + ("\n" if stderr and not stderr.endswith("\n") else "")
                      + f"TimeoutError: execution exceeded the {self.timeout_s:g} s time limit")
        if stderr and self.keep_error_last_line:
            stderr = stderr.rstrip("\n").split("\n")[-1]
        text = f"{result.stdout}\n{stderr}" if stderr else result.stdout
        observation = _PREFIX + text.lstrip(" \n") + "\n"
        if self.persistent and result.ok:
            self._cells.append(code)
        return ToolResult(
            observation=observation,
            error=not result.ok,
            info={
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "truncated": result.truncated,
                "duration_s": result.duration_s,
                "isolation": self.sandbox.isolation,
                **({"sandbox_error": result.sandbox_error} if result.sandbox_error else {}),
            },
        )

    def run(self, action: str) -> ToolResult | None:
        """Parse and execute in one step; ``None`` when ``action`` holds no code block."""
        call = self.parse(action)
        return None if call is None else self.execute(call)

    def instruction(self) -> str:
        return (
            "You can run Python code to help your reasoning: put a complete script inside "
            "<python>...</python> tags or a ```python ... ``` block. It runs in an isolated "
            "sandbox without network access, and what it prints comes back after "
            '"Code execution result: ". Use print() to see values.'
            + (" Variables and imports persist between your code blocks in this episode."
               if self.persistent else " Each block runs from scratch, so include its imports.")
        )

    def reset(self) -> None:
        """Start a new episode: forget the persistent session's cells."""
        self._cells = []

    def close(self) -> None:
        """Close the sandbox this tool created (a shared one is left open). Safe twice."""
        with self._lock:
            self._closed = True
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None and self._owns_sandbox:
            sandbox.close()


def _tag_block(action: str) -> tuple[int, int, int, int] | None:
    """``(start, code start, code end, end)`` of the first ``<python>...</python>``."""
    block = first_block(action, _TAG_OPEN, _TAG_CLOSE)
    return None if block is None else (*block, block[2] + len(_TAG_CLOSE))


def _fence_block(action: str) -> tuple[int, int, int, int] | None:
    """The first ```` ```python ```` (or ``py``/``python3``) fence and the ``` that ends it.

    The first fence opening that is followed by a closing ``` is the first opening at all
    (a ``` after a later opening also follows the first one), so one search for the
    opening and one for the close suffice.
    """
    opening = _FENCE_OPEN.search(action)
    if opening is None:
        return None
    close = action.find(_FENCE, opening.end())
    if close < 0:
        return None
    return opening.start(), opening.end(), close, close + len(_FENCE)
