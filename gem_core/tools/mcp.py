"""The MCP tool: call the tools of a Model Context Protocol server over one persistent session."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from gem_core.errors import (
    InvalidArgument,
    InvalidArgumentType,
    MCPConnectionError,
    import_optional,
)
from gem_core.tools.base import Tool, ToolCall, ToolResult
from gem_core.tools.text import (
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    JSONLimitError,
    is_text,
    loads_bounded,
)

__all__ = ["MCPTool", "MCPConnectionError", "MAX_JSON_CHARS", "MAX_JSON_DEPTH", "parse_body"]

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_NAME_OPEN, _NAME_CLOSE = "<tool_name>", "</tool_name>"
_ARGS_OPEN, _ARGS_CLOSE = "<arguments>", "</arguments>"
_XML_EXPECTED = (
    "expected <tool_name>NAME</tool_name><arguments>{...}</arguments> inside <tool_call>"
)
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _import_mcp() -> Any:
    return import_optional("mcp", extra="mcp", purpose="MCP tools")


def _failure(message: str, reason: str, info: Mapping[str, Any] | None = None) -> ToolResult:
    """An ``error=True`` observation ``"MCP error: {message}"``; its info (``info`` and more)
    names the ``reason``."""
    return ToolResult(f"MCP error: {message}", error=True, info={**(info or {}), "reason": reason})


def _leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio task groups wrap transport errors)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf).strip() or "no message"
    return f"{type(leaf).__name__}: {text}"


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """An attribute under its mcp 2.x (snake_case) or 1.x (camelCase) name."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


def _clip(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n... [{cut} characters truncated] ...\n{text[-tail:]}"


class _Connection:
    """One MCP session, owned by a single task on the tool's loop.

    anyio requires a context (transport, session) to be entered and exited in the same
    task, so an owner task opens both, publishes the session through ``ready`` and holds
    it until ``stop`` is set; calls run in other tasks on the same loop.
    """

    def __init__(self, open_transport: Callable[[], Any], client_session: type):
        self.open_transport = open_transport
        self.client_session = client_session
        self.ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.session: Any = None
        self.task = asyncio.ensure_future(self._own())

    async def _own(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self.open_transport())
                session = await stack.enter_async_context(
                    self.client_session(streams[0], streams[1])
                )
                await session.initialize()
                self.session = session
                self.ready.set_result(session)
                await self.stop.wait()
        except asyncio.CancelledError:
            if not self.ready.done():
                self.ready.cancel()
            raise
        except BaseException as exc:  # noqa: BLE001 - shipped to the waiter
            if not self.ready.done():
                self.ready.set_exception(exc)
            # Otherwise the transport died mid-session; the task's end is the signal.

    async def close(self, timeout: float) -> None:
        self.stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except BaseException:  # noqa: BLE001 - closing must not raise
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.task, 2.0)


class MCPTool(Tool):
    """Calls the tools of one MCP server (stdio or streamable HTTP) through the official SDK.

    One persistent session per tool, not per call: the SDK's async client runs on a
    background event-loop thread owned by the tool, and the synchronous `execute` submits
    coroutines to it. The server's tool list is fetched once, at first use, and rendered
    into `instruction` (names, descriptions, JSON input schemas and the call format).

    Call formats (the earliest ``<tool_call>`` block of the action is used):

    - JSON, as common chat templates emit it:
      ``<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>``
      (``"arguments"`` may also be a JSON-encoded string, or be named ``"parameters"``);
    - the reference GEM's XML form:
      ``<tool_call><tool_name>add</tool_name><arguments>{"a": 1}</arguments></tool_call>``.

    A block whose closing tag is missing at the end of the action (generation stopped on
    ``</tool_call>``) is still a call. Everything that goes wrong with a call becomes an
    observation with ``error=True`` — never an exception into the rollout and never a
    fall-through to the task: bad JSON, an unknown tool, arguments that fail the input
    schema (required keys and top-level types, when ``validate_arguments``), a tool that
    raises (``isError`` result), a timeout, a server that cannot be reached or dies.

    Malformed and hostile calls: `parse` never raises and runs in time linear in the
    action's length on any string (the blocks are cut with `str.find`, no backtracking
    regular expression). JSON (the call object, the ``<arguments>`` block, or arguments
    sent as a JSON string) longer than `MAX_JSON_CHARS` (1 MB) or nested deeper than
    `MAX_JSON_DEPTH` (64 levels, checked by a linear pre-scan before decoding) is refused
    as malformed; a malformed call is answered ``MCP error: could not read the tool call:
    REASON. Expected ...`` (``info["reason"] == "bad_call"``) without contacting the
    server. What the server does with well-formed but hostile arguments is the server's
    business (the shop server of ``mcp:*`` bounds its SQL; see
    `gem_core.envs.mcp_tasks.server`).

    Failure policy: a timeout or a lost connection drops the session (a stdio server is
    stopped); the *next* call opens a new one, trying ``max_retries + 1`` times with
    ``retry_delay`` seconds between tries. A failed call is never re-sent by itself (a
    tool may have side effects).

    Args:
        command: executable of a stdio server (with ``args``, ``env``, ``cwd``).
        args: its arguments.
        env: extra environment variables for the server process.
        cwd: its working directory.
        url: endpoint of a streamable-HTTP server (e.g. ``http://127.0.0.1:8000/mcp``);
            give either ``command`` or ``url``.
        headers: HTTP headers sent with every request (e.g. an ``Authorization`` header).
        name: the tool's name (``info["tool_name"]`` in `ToolEnvWrapper`).
        timeout: seconds one call may take before it becomes a timeout observation.
        connect_timeout: seconds to open a session (start, initialize, list tools).
        max_retries: extra tries to open a session before a call reports failure.
        retry_delay: seconds between those tries.
        max_output_chars: longer results keep their head and tail with a marker between.
        validate_arguments: check arguments against the tool's input schema before sending.
        allowed_tools: expose only these server tools (default: all).
        errlog: where a stdio server's stderr goes (a file with a ``fileno``; default
            ``sys.stderr``).
    """

    name = "mcp"

    def __init__(
        self,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        name: str = "mcp",
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        max_retries: int = 2,
        retry_delay: float = 0.5,
        max_output_chars: int = 20_000,
        validate_arguments: bool = True,
        allowed_tools: Sequence[str] | None = None,
        errlog: TextIO | None = None,
    ):
        if (command is None) == (url is None):
            raise InvalidArgument(
                "MCPTool needs exactly one server: command=... (stdio) or url=... (streamable "
                f"HTTP); got command={command!r}, url={url!r}"
            )
        if isinstance(args, str):
            raise InvalidArgumentType(f"args must be a list of strings, got the string {args!r}")
        if timeout <= 0 or connect_timeout <= 0:
            raise InvalidArgument(
                f"timeouts must be > 0, got timeout={timeout}, connect_timeout={connect_timeout}"
            )
        if max_retries < 0:
            raise InvalidArgument(f"max_retries must be >= 0, got {max_retries}")
        self._mcp = _import_mcp()
        self.name = name  # type: ignore[misc]
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.url = url
        self.headers = dict(headers) if headers is not None else None
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.max_retries = int(max_retries)
        self.retry_delay = float(retry_delay)
        self.max_output_chars = int(max_output_chars)
        self.validate_arguments = validate_arguments
        self.allowed_tools = set(allowed_tools) if allowed_tools is not None else None
        self.errlog = errlog
        self._tools: dict[str, dict[str, Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conn: _Connection | None = None
        self._conn_lock: asyncio.Lock | None = None
        self._start_lock = threading.Lock()

    def __repr__(self) -> str:
        where = self.url if self.url is not None else " ".join([self.command or "", *self.args])
        return f"MCPTool(name={self.name!r}, server={where!r})"

    # --- the event-loop thread -------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name=f"gem-mcp-{self.name}", daemon=True)
                thread.start()
                started.wait()
                self._loop, self._thread = loop, thread
                self._conn = None
                self._conn_lock = None
            return self._loop

    def _submit(self, coro: Any, timeout: float) -> Any:
        """Run ``coro`` on the tool's loop and wait for it (at most ``timeout`` seconds)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def _backstop(self) -> float:
        # Every wait inside has its own bound; this outer one only guards against a bug.
        connect = (self.connect_timeout + self.retry_delay) * (self.max_retries + 1)
        return self.timeout + connect + 15.0

    # --- sessions (these run on the loop) --------------------------------------------
    def _open_transport(self) -> Any:
        if self.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=self.command, args=self.args, env=self.env, cwd=self.cwd
            )
            return stdio_client(params, errlog=_errlog(self.errlog))
        from mcp.client import streamable_http

        assert self.url is not None
        new_api = getattr(streamable_http, "streamable_http_client", None)
        if new_api is not None and "http_client" in _params(new_api):
            client = None
            if self.headers:
                from mcp.shared._httpx_utils import create_mcp_http_client

                client = create_mcp_http_client(headers=self.headers)
            return _owning_client(new_api, self.url, client)
        old_api = streamable_http.streamablehttp_client  # mcp 1.x
        return old_api(self.url, headers=self.headers)

    async def _session(self) -> _Connection:
        """The live connection, opened (with bounded retries) when there is none."""
        if self._conn_lock is None:
            self._conn_lock = asyncio.Lock()
        async with self._conn_lock:
            conn = self._conn
            if conn is not None and not conn.task.done():
                return conn
            if conn is not None:
                self._conn = None
                await conn.close(5.0)
            last: BaseException | None = None
            for attempt in range(self.max_retries + 1):
                if attempt:
                    await asyncio.sleep(self.retry_delay)
                conn = _Connection(self._open_transport, self._mcp.ClientSession)
                try:
                    await asyncio.wait_for(asyncio.shield(conn.ready), self.connect_timeout)
                    if self._tools is None:
                        self._tools = await asyncio.wait_for(
                            self._fetch_tools(conn.session), self.connect_timeout
                        )
                except Exception as exc:  # noqa: BLE001 - retried, then reported
                    last = (
                        TimeoutError(f"no answer within {self.connect_timeout}s")
                        if isinstance(exc, asyncio.TimeoutError)
                        else exc
                    )
                    await conn.close(5.0)
                    continue
                self._conn = conn
                return conn
            assert last is not None
            raise MCPConnectionError(
                f"could not open an MCP session with {self._where()} after "
                f"{self.max_retries + 1} tries: {_describe(last)}"
            ) from last

    async def _fetch_tools(self, session: Any) -> dict[str, dict[str, Any]]:
        tools: dict[str, dict[str, Any]] = {}
        cursor = None
        for _ in range(100):  # pages
            if cursor is None:
                result = await session.list_tools()
            else:
                try:
                    params = self._mcp.types.PaginatedRequestParams(cursor=cursor)
                    result = await session.list_tools(params=params)
                except TypeError:  # mcp 1.x before `params`
                    result = await session.list_tools(cursor=cursor)
            for tool in result.tools:
                if self.allowed_tools is not None and tool.name not in self.allowed_tools:
                    continue
                schema = _get(tool, "input_schema", "inputSchema", default=None)
                tools[tool.name] = {
                    "name": tool.name,
                    "description": (tool.description or "").strip(),
                    "parameters": dict(schema) if schema else {"type": "object", "properties": {}},
                }
            cursor = _get(result, "next_cursor", "nextCursor")
            if not cursor:
                break
        return tools

    async def _drop(self, conn: _Connection) -> None:
        if self._conn is conn:
            self._conn = None
        await conn.close(5.0)

    async def _call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        info: dict[str, Any] = {"mcp_tool": tool}
        try:
            conn = await self._session()
        except MCPConnectionError as exc:
            return _failure(f"{exc}.", "connect", info)
        tools = self._tools or {}
        if tool not in tools:
            known = ", ".join(sorted(tools)) or "(none)"
            return _failure(
                f"unknown tool {tool!r}. Available tools: {known}.", "unknown_tool", info
            )
        bad = _invalid_text(arguments)  # always: the server drops the session on it
        if bad is not None:
            return _failure(
                f"invalid arguments for {tool!r}: an argument is not valid text (it holds a lone "
                f"surrogate: {bad[:40]!r}).",
                "bad_arguments",
                info,
            )
        if self.validate_arguments:
            problem = _check_arguments(arguments, tools[tool]["parameters"])
            if problem:
                return _failure(
                    f"invalid arguments for {tool!r}: {problem}. Input schema: "
                    f"{json.dumps(tools[tool]['parameters'])}",
                    "bad_arguments",
                    info,
                )
        call = asyncio.ensure_future(conn.session.call_tool(tool, arguments))
        done, _ = await asyncio.wait(
            {call, conn.task}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if call not in done:
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            await self._drop(conn)
            if conn.task in done:
                return _failure(
                    f"the connection to the server was lost during {tool!r}; a new "
                    "session will be opened on the next call.",
                    "connection_lost",
                    info,
                )
            return _failure(
                f"{tool!r} timed out after {self.timeout:g}s; the session was reset.",
                "timeout",
                info,
            )
        exc = call.exception()
        if exc is None:
            return self._render(tool, call.result(), info)
        # A JSON-RPC error answer leaves the session usable; a dead transport does not.
        alive = await self._alive(conn)
        if not alive:
            await self._drop(conn)
            return _failure(
                f"the connection to the server was lost during {tool!r} "
                f"({_describe(exc)}); a new session will be opened on the next call.",
                "connection_lost",
                info,
            )
        return _failure(f"{tool!r} failed: {_describe(exc)}", "call_failed", info)

    async def _alive(self, conn: _Connection) -> bool:
        if conn.task.done():
            return False
        try:
            await asyncio.wait_for(conn.session.send_ping(), min(5.0, self.timeout))
        except Exception:  # noqa: BLE001 - any failure means the session is unusable
            return False
        return True

    def _render(self, tool: str, result: Any, info: dict[str, Any]) -> ToolResult:
        parts: list[str] = []
        for block in _get(result, "content", default=[]) or []:
            kind = getattr(block, "type", "")
            if kind == "text":
                parts.append(block.text)
            elif kind in ("image", "audio"):
                mime = _get(block, "mime_type", "mimeType", default="?")
                parts.append(f"[{kind} content: {mime}, {len(block.data or '')} base64 characters]")
            elif kind == "resource":
                res = block.resource
                text = getattr(res, "text", None)
                parts.append(text if text is not None else f"[resource {res.uri}]")
            elif kind == "resource_link":
                parts.append(f"[resource link {block.uri}]")
            else:
                parts.append(str(block))
        if not parts:
            structured = _get(result, "structured_content", "structuredContent")
            if structured is not None:
                parts.append(json.dumps(structured, ensure_ascii=False, default=str))
        text = _clip("\n".join(parts), self.max_output_chars)
        if _get(result, "is_error", "isError", default=False):
            return _failure(
                f"{tool!r} raised an error: {text or '(no message)'}", "tool_error", info
            )
        return ToolResult(text if text else "(the tool returned no output)", info=info)

    def _where(self) -> str:
        if self.url is not None:
            return self.url
        return "the stdio server " + " ".join([self.command or "", *self.args]).strip()

    # --- the Tool API ----------------------------------------------------------------
    def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools as ``{"name", "description", "parameters"}`` dicts.

        Fetched once (opening the session); later calls use the cached list.

        Raises:
            MCPConnectionError: the server could not be reached.
        """
        if self._tools is None:
            try:
                self._submit(self._session(), self._backstop())
            except concurrent.futures.TimeoutError:
                raise MCPConnectionError(
                    f"no MCP session with {self._where()}: timed out"
                ) from None
        return list((self._tools or {}).values())

    def handles(self, call: ToolCall) -> bool | None:
        """Whether this server has the tool ``call`` names (`ToolEnvWrapper` routes calls
        among several MCP servers with it): ``True`` (also for a malformed call, which
        any server answers alike), ``False``, or ``None`` when the server's tool list
        cannot be fetched (unreachable)."""
        payload = call.payload if isinstance(call.payload, dict) else {}
        if payload.get("error") or not isinstance(payload.get("name"), str):
            return True
        try:
            names = {t["name"] for t in self.list_tools()}
        except MCPConnectionError:
            return None
        return payload["name"] in names

    def instruction(self) -> str:
        """The call format and every tool's name, description and JSON input schema.

        Raises:
            MCPConnectionError: the server could not be reached to list its tools.
        """
        functions = [
            json.dumps({"type": "function", "function": t}, ensure_ascii=False)
            for t in sorted(self.list_tools(), key=lambda t: t["name"])
        ]
        return (
            "# MCP tools\n"
            "You may call one of the tools below by writing a JSON object with the tool's name "
            "and its arguments inside <tool_call></tool_call> tags, for example:\n"
            '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>\n'
            "The arguments must follow the tool's JSON input schema. The equivalent form "
            '<tool_call><tool_name>tool_name</tool_name><arguments>{"param": "value"}'
            "</arguments></tool_call> is also accepted. One call per message; the result "
            "comes back in the next message.\n"
            "Available tools:\n<tools>\n" + "\n".join(functions) + "\n</tools>"
        )

    def parse(self, action: str) -> ToolCall | None:
        """The earliest ``<tool_call>`` block as ``payload = {"name", "arguments", "error"}``.

        Malformed blocks still parse (``payload["error"]`` says what is wrong) so that
        `execute` can tell the agent; only an action with no ``<tool_call>`` tag is
        ``None``. Never raises; linear time in ``len(action)``.
        """
        if not isinstance(action, str):
            return None
        start = action.find(_OPEN)
        if start < 0:
            return None
        body_start = start + len(_OPEN)
        end = action.find(_CLOSE, body_start)
        if end < 0:
            body, stop = action[body_start:], len(action)
        else:
            body, stop = action[body_start:end], end + len(_CLOSE)
        try:
            name, arguments, error = parse_body(body)
        except Exception as exc:  # noqa: BLE001 - parse never raises (the Tool contract)
            name, arguments, error = None, None, f"unreadable call ({type(exc).__name__})"
        payload = {"name": name, "arguments": arguments, "error": error}
        return ToolCall(tool=self.name, payload=payload, span=(start, stop), raw=action[start:stop])

    def execute(self, call: ToolCall) -> ToolResult:
        """Run a parsed call on the server; every failure is an error observation."""
        payload = call.payload if isinstance(call.payload, dict) else {}
        if payload.get("error"):
            return _failure(
                f"could not read the tool call: {payload['error']}. Expected "
                '<tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>.',
                "bad_call",
            )
        tool, arguments = payload.get("name"), payload.get("arguments") or {}
        try:
            return self._submit(self._call(tool, arguments), self._backstop())
        except concurrent.futures.TimeoutError:
            return _failure(f"{tool!r} did not finish in time.", "timeout")
        except Exception as exc:  # noqa: BLE001 - never raise into the rollout
            return _failure(f"{tool!r} failed: {_describe(exc)}", "internal")

    def close(self) -> None:
        """Close the session (stopping a stdio server) and the loop thread. Safe twice.

        A later call opens a new loop and session (the tool list stays cached).
        """
        with self._start_lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if thread.is_alive():

            async def shutdown() -> None:
                conn, self._conn = self._conn, None
                if conn is not None:
                    await conn.close(5.0)

            with contextlib.suppress(BaseException):
                asyncio.run_coroutine_threadsafe(shutdown(), loop).result(15.0)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10.0)
        if not thread.is_alive():
            loop.close()


def _errlog(errlog: TextIO | None) -> TextIO:
    """Where a stdio server's stderr goes: ``errlog``, else ``sys.stderr`` when it is a real
    file (a notebook's or a test runner's replacement has no ``fileno``), else the
    process's original stderr."""
    for stream in (errlog, sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return stream
    return open(os.devnull, "w")  # noqa: SIM115 - lives as long as the server


def _params(fn: Callable[..., Any]) -> set[str]:
    import inspect

    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


@contextlib.asynccontextmanager
async def _owning_client(open_fn: Callable[..., Any], url: str, client: Any):
    """``streamable_http_client`` (mcp >= 1.24 / 2.x) that also closes a client we built."""
    async with contextlib.AsyncExitStack() as stack:
        if client is not None:
            await stack.enter_async_context(client)
        streams = await stack.enter_async_context(open_fn(url, http_client=client))
        yield streams


def parse_body(body: str) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """``(name, arguments, error)`` of the text between the tool-call tags.

    Linear in ``len(body)`` whatever it holds: the XML form is cut with `str.find` (no
    regular expression), and JSON goes through `loads_bounded` (size and depth checked
    before decoding).
    """
    text = body.strip()
    if not text:
        return None, None, "the <tool_call> block is empty"
    if text.startswith("<"):
        return _parse_xml(text)
    try:
        obj = loads_bounded(text)
    except JSONLimitError as exc:
        return None, None, str(exc)
    except json.JSONDecodeError as exc:
        return None, None, f"invalid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(obj, dict):
        return None, None, f"expected a JSON object, got {type(obj).__name__}"
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, None, 'the JSON object needs a "name" string'
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # some templates emit the arguments as a JSON string
        try:
            arguments = loads_bounded(arguments) if arguments.strip() else {}
        except JSONLimitError as exc:
            return name, None, f'"arguments" is a string whose JSON is refused: {exc}'
        except json.JSONDecodeError as exc:
            return name, None, f'"arguments" is a string but not valid JSON ({exc.msg})'
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return name, None, f'"arguments" must be a JSON object, got {type(arguments).__name__}'
    return name.strip(), arguments, None


def _parse_xml(text: str) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """The ``<tool_name>NAME</tool_name>[<arguments>JSON</arguments>]`` form (``text`` is
    stripped): the name runs to the first ``<``, which must open ``</tool_name>``; after
    it, only whitespace or one ``<arguments>`` block ending the text."""
    if not text.startswith(_NAME_OPEN):
        return None, None, _XML_EXPECTED
    name_end = text.find("<", len(_NAME_OPEN))
    if name_end < 0 or not text.startswith(_NAME_CLOSE, name_end):
        return None, None, _XML_EXPECTED
    name = text[len(_NAME_OPEN) : name_end].strip()
    rest = text[name_end + len(_NAME_CLOSE) :].lstrip()
    raw = ""
    if rest:
        if (
            not rest.startswith(_ARGS_OPEN)
            or not rest.endswith(_ARGS_CLOSE)
            or len(rest) < len(_ARGS_OPEN) + len(_ARGS_CLOSE)
        ):
            return None, None, _XML_EXPECTED
        raw = rest[len(_ARGS_OPEN) : len(rest) - len(_ARGS_CLOSE)].strip()
    if not name:
        return None, None, "the tool name is empty"
    if not raw:
        return name, {}, None
    try:
        arguments = loads_bounded(raw)
    except JSONLimitError as exc:
        return name, None, f"the arguments are refused: {exc}"
    except json.JSONDecodeError as exc:
        return name, None, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(arguments, dict):
        return name, None, f"the arguments must be a JSON object, got {type(arguments).__name__}"
    return name, arguments, None


def _invalid_text(value: Any) -> str | None:
    """The first string (key or value) in ``value`` that is not valid Unicode (a lone
    surrogate, e.g. from a JSON ``"\\udcff"``: the server's JSON reader drops the session on
    it), else None. Iterative, linear in the size of ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not is_text(item):
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _check_arguments(arguments: dict[str, Any], schema: Mapping[str, Any]) -> str | None:
    """A light input-schema check: required keys, top-level types, unknown keys when closed."""
    props = schema.get("properties") or {}
    missing = [k for k in schema.get("required") or [] if k not in arguments]
    if missing:
        return f"missing required argument(s) {', '.join(map(repr, missing))}"
    if schema.get("additionalProperties") is False:
        extra = [k for k in arguments if k not in props]
        if extra:
            return f"unknown argument(s) {', '.join(map(repr, extra))}"
    for key, value in arguments.items():
        spec = props.get(key)
        if not isinstance(spec, Mapping) or "type" not in spec:
            continue
        kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        allowed = tuple(t for k in kinds for t in _JSON_TYPES.get(k, (object,)))
        ok = isinstance(value, allowed) and not (isinstance(value, bool) and "boolean" not in kinds)
        if not ok:
            return f"{key!r} must be of type {' or '.join(kinds)}, got {type(value).__name__}"
    return None
