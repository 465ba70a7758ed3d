"""The reference GEM's time MCP server (``gem.tools.mcp_server.time_mcp``) on the official MCP SDK.

Six read-only tools: `current_time`, `relative_time`, `days_in_month`, `get_timestamp`,
`convert_time` and `get_week_year`. Run the server (streamable HTTP on 127.0.0.1 unless told
otherwise, or stdio)::

    python -m gem_core.compat.tools.mcp_server.time_mcp --transport streamable-http \\
        --host 127.0.0.1 --port 8081 --path /time-mcp

`app` is a real server of the SDK (``MCPServer`` in mcp 2.x, ``FastMCP`` in mcp 1.x): it
runs with ``app.run(transport=...)``, serves ``app.streamable_http_app()`` and connects to
the SDK's in-memory client. It is a `ToolServer`, a subclass that adds the one call the
reference's users make on its fastmcp server, ``tool = await app.get_tool(name)`` and then
``result = await tool.run({...})`` (``result.content[0].text`` is the answer). The tool
functions stay plain functions: ``current_time(format="YYYY-MM-DD")`` works without MCP.

Input: a time is ``YYYY-MM-DD HH:mm:ss`` with an optional fraction of a second
(``.SSS``), a date ``YYYY-MM-DD``; both are read as wall-clock time in the server's local
time zone (`convert_time`: in its source zone), and time zones are IANA names. The readers
split the text at fixed separators (no regular expression) after refusing anything longer
than `MAX_INPUT_CHARS`, so they run in linear time on any input. Bad input raises
`gem_core.errors.InvalidArgument` (a ``ValueError``) whose message names the expected shape
and what arrived; an MCP client receives that message as an ``isError`` result, and
``await tool.run(...)`` raises the SDK's ``ToolError`` carrying it (``__cause__`` is the
``InvalidArgument``).

Differences from the reference:

- an unknown time zone is an error (the reference silently used the local zone, which made
  `convert_time` answer wrongly);
- local time uses the UTC offset in force at the given date (the reference applied today's
  offset to every date, an hour off across a daylight-saving change);
- `get_timestamp` counts milliseconds in integers (the reference's float product lost one
  for some times, e.g. ``2038-06-19 15:11:36.733`` UTC gave ``...732``), rounding down
  before 1970 (the reference rounded toward zero there);
- a ``%`` in a `current_time` format is printed as itself, and a failing format is an error
  rather than a silent fall-back to the default format;
- `current_time` and the other tool names are the plain functions (fastmcp 2.x's decorator
  bound them to tool objects; use ``await app.get_tool(name)`` for those).
"""

from __future__ import annotations

import argparse
import calendar
import difflib
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, tzinfo
from datetime import timezone as dt_timezone
from typing import Any
from zoneinfo import ZoneInfo

from gem_core.errors import InvalidArgument, import_optional

__all__ = [
    "app",
    "convert_time",
    "current_time",
    "days_in_month",
    "get_timestamp",
    "get_week_year",
    "logger",
    "relative_time",
    "main",
    "BoundTool",
    "ToolServer",
    "DEFAULT_FORMAT",
    "MAX_INPUT_CHARS",
    "MAX_FORMAT_CHARS",
]

logger = logging.getLogger(__name__)

DEFAULT_FORMAT = "YYYY-MM-DD HH:mm:ss"
MAX_INPUT_CHARS = 64
"""Longest date, time or time-zone text accepted."""
MAX_FORMAT_CHARS = 256
"""Longest `current_time` format accepted."""

DATE_SHAPE = "a date 'YYYY-MM-DD' (e.g. '2025-03-23')"
TIME_SHAPE = (
    "a time 'YYYY-MM-DD HH:mm:ss' or 'YYYY-MM-DD HH:mm:ss.SSS' (e.g. '2025-03-23 12:30:00')"
)
TRANSPORTS = ("stdio", "http", "streamable-http")


def _sdk() -> tuple[type, type[Exception], Any, bool]:
    """``(server class, ToolError, mcp.types, is mcp 1.x)``; `DependencyNotInstalled` naming
    the ``pip install`` command when the SDK is missing."""
    import_optional("mcp", extra="mcp", purpose="the time MCP server (gem.tools.mcp_server)")
    import mcp.types as types

    mcp1 = False
    try:
        from mcp.server.mcpserver import MCPServer as server
        from mcp.server.mcpserver.exceptions import ToolError as tool_error
    except ImportError:
        from mcp.server.fastmcp import FastMCP as server
        from mcp.server.fastmcp.exceptions import ToolError as tool_error

        mcp1 = True
    return server, tool_error, types, mcp1


_Server, _ToolError, _types, _MCP1 = _sdk()


class _Refusal(_ToolError, InvalidArgument):  # type: ignore[misc, valid-type]
    """The `InvalidArgument` the readers raise, also the SDK's ``ToolError`` so that the SDK
    passes its message to the client (mcp 2.x hides the text of other exceptions). Catch it
    as `InvalidArgument` or ``ValueError``."""


# --- in-process calls: the fastmcp interface the reference's users rely on -----------------


class BoundTool:
    """One tool of a `ToolServer`, called in-process with ``await tool.run(arguments)``.

    Attributes:
        name: the tool's name.
        description: what the server tells clients about it.
        parameters: the JSON schema of its arguments.
    """

    def __init__(self, server: ToolServer, name: str, description: str, parameters: dict[str, Any]):
        self._server = server
        self.name = name
        self.description = description
        self.parameters = parameters

    def __repr__(self) -> str:
        return f"BoundTool(name={self.name!r}, server={self._server.name!r})"

    async def run(self, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call the tool as a client would: arguments checked against `parameters`, the
        answer as the SDK's ``CallToolResult`` (text in ``result.content[0].text``).

        Raises:
            ToolError: (the SDK's) the arguments do not fit the schema, or the tool refused
                them (an `InvalidArgument`, whose message the ``ToolError`` carries).
        """
        result = await self._server.call_tool(self.name, dict(arguments or {}))
        if isinstance(result, _types.CallToolResult):  # mcp 2.x
            return result
        structured = None
        if isinstance(result, tuple):  # mcp 1.x, a tool with an output schema
            result, structured = result
        return _types.CallToolResult(content=list(result), structuredContent=structured)


class ToolServer(_Server):  # type: ignore[misc, valid-type]
    """The SDK's MCP server plus fastmcp's ``await server.get_tool(name)``.

    Nothing of the SDK server is overridden; `get_tool` uses only its public
    ``list_tools`` and ``call_tool``.
    """

    async def get_tool(self, name: str) -> BoundTool:
        """The tool called ``name``, to `BoundTool.run` in-process.

        Raises:
            ToolError: (the SDK's) no tool has that name; the message lists the tools.
        """
        tools = {tool.name: tool for tool in await self.list_tools()}
        tool = tools.get(name)
        if tool is None:
            close = difflib.get_close_matches(str(name), list(tools), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise _ToolError(
                f"{self.name} has no tool {name!r}.{hint} Its tools: {', '.join(sorted(tools))}"
            )
        schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}
        return BoundTool(self, tool.name, tool.description or "", dict(schema))


def _build_app() -> ToolServer:
    # The SDK's constructor calls logging.basicConfig; importing this module must leave the
    # importer's logging as it was (main() configures logging for the server process).
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return ToolServer("mcp-time-server")
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


app = _build_app()


# --- readers of tool input (linear time, bounded length) ------------------------------------


def _bounded(text: Any, what: str, limit: int = MAX_INPUT_CHARS) -> str:
    if not isinstance(text, str):
        raise _Refusal(f"expected {what} as a string, got {type(text).__name__} {text!r}")
    if len(text) > limit:
        raise _Refusal(f"expected {what}, got a text of {len(text)} characters (at most {limit})")
    return text


def _is_number(text: str, min_len: int, max_len: int) -> bool:
    return min_len <= len(text) <= max_len and text.isascii() and text.isdigit()


def _read(text: Any, *, clock: bool) -> datetime:
    """The naive datetime written as `TIME_SHAPE` (``clock``) or `DATE_SHAPE`.

    Month, day, hour, minute and second may have one digit (as ``strptime`` allows); the
    year has four; a fraction of a second has any number of digits, cut to microseconds.
    """
    shape = TIME_SHAPE if clock else DATE_SHAPE
    text = _bounded(text, shape)
    day, space, clock_text = text.strip().partition(" ")
    fields = day.split("-")
    fraction, dot = "", ""
    if clock:
        hms, dot, fraction = clock_text.partition(".")
        fields += hms.split(":")
    if (
        len(fields) != (6 if clock else 3)
        or (space != "") != clock
        or not _is_number(fields[0], 4, 4)
        or not all(_is_number(field, 1, 2) for field in fields[1:])
        or (dot and not _is_number(fraction, 1, MAX_INPUT_CHARS))
    ):
        raise _Refusal(f"expected {shape}, got {text!r}")
    numbers = [int(field) for field in fields]
    micro = int(fraction[:6].ljust(6, "0")) if fraction else 0
    try:
        return datetime(*numbers, micro)
    except ValueError as exc:
        kind = "time" if clock else "date"
        raise _Refusal(f"{text!r} is not a valid {kind}: {exc}") from None


def _as_local(naive: datetime, text: str) -> datetime:
    """``naive`` as wall-clock time in the local zone, with the UTC offset of that date."""
    try:
        return naive.astimezone()
    except (OverflowError, OSError, ValueError) as exc:
        raise _Refusal(f"{text!r} is outside the range of local time: {exc}") from None


def _parse_dt(time_str: str) -> datetime:
    """``'YYYY-MM-DD HH:mm:ss[.SSS]'`` as an aware datetime in the local time zone."""
    return _as_local(_read(time_str, clock=True), time_str)


def _parse_date(date_str: str) -> datetime:
    """``'YYYY-MM-DD'`` as an aware datetime at 00:00:00 in the local time zone."""
    return _as_local(_read(date_str, clock=False), date_str)


def _local_zone() -> tzinfo:
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


def _zone(name: str | None) -> tzinfo:
    """The IANA time zone ``name``; the local zone for None or ``""``."""
    if name is None or name == "":
        return _local_zone()
    name = _bounded(name, "an IANA time zone name")
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # not found; not a key; a folder such as "America"
        raise _Refusal(
            f"unknown time zone {name!r}: expected an IANA name such as 'UTC', 'Asia/Shanghai' "
            "or 'America/New_York' (if every name fails, install the tz data: pip install tzdata)"
        ) from None


_MOMENT = {
    "YYYY": "%Y",
    "YY": "%y",
    "MM": "%m",
    "DD": "%d",
    "HH": "%H",
    "h": "%-I",
    "mm": "%M",
    "ss": "%S",
    "A": "%p",
}


def _moment_to_strftime(fmt: str) -> str:
    """A Moment.js-style pattern as a ``strftime`` format.

    Tokens (longest match first, left to right): ``YYYY`` ``YY`` ``MM`` ``DD`` ``HH``
    (24-hour) ``h`` (12-hour, no leading zero: ``%-I``) ``mm`` ``ss`` ``A`` (AM/PM). Every
    other character stands for itself (``%`` included).
    """
    fmt = _bounded(fmt, "a format such as 'YYYY-MM-DD HH:mm:ss'", MAX_FORMAT_CHARS)
    out: list[str] = []
    i = 0
    while i < len(fmt):
        for size in (4, 2, 1):
            code = _MOMENT.get(fmt[i : i + size])
            if code is not None:
                out.append(code)
                i += size
                break
        else:
            out.append("%%" if fmt[i] == "%" else fmt[i])
            i += 1
    return "".join(out)


def _wall_clock(moment: datetime) -> str:
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec="seconds")


_EPOCH = datetime(1970, 1, 1, tzinfo=dt_timezone.utc)
_RELATIVE_UNITS = (("seconds", 60), ("minutes", 60), ("hours", 24), ("days", 30), ("months", 12))


# --- the tools ------------------------------------------------------------------------------


def _tool(title: str) -> Any:
    return app.tool(annotations=_types.ToolAnnotations(title=title, readOnlyHint=True))


@_tool("Current date and time")
def current_time(format: str = DEFAULT_FORMAT, timezone: str | None = None) -> str:
    """The current date and/or time, written with a Moment.js-style format.

    Args:
        format: tokens YYYY, YY, MM, DD, HH (24-hour), h (12-hour), mm, ss and A (AM/PM);
            other characters are kept. E.g. 'YYYY-MM-DD HH:mm:ss' (the default),
            'YYYY-MM-DD', 'YYYY-MM', 'MM/DD/YYYY', 'MM/DD/YY', 'YYYY/MM/DD', 'h:mm A',
            'h:mm:ss A'.
        timezone: an IANA time zone such as 'Asia/Shanghai' or 'UTC'; the server's local
            zone if omitted.
    """
    pattern, zone = _moment_to_strftime(format), _zone(timezone)
    try:
        return datetime.now(zone).strftime(pattern)
    except ValueError as exc:
        raise _Refusal(f"cannot write the time with format {format!r}: {exc}") from None


@_tool("Time from now")
def relative_time(time: str) -> str:
    """How far a local time is from now, e.g. 'in 3 hours' or '2 days ago' (a month is 30
    days, a year 12 months; each count is rounded down).

    Args:
        time: 'YYYY-MM-DD HH:mm:ss', e.g. '2025-03-23 12:30:00'.
    """
    seconds = int((_parse_dt(time) - datetime.now(dt_timezone.utc)).total_seconds())
    value, unit = abs(seconds), "years"
    for name, size in _RELATIVE_UNITS:
        if value < size:
            unit = name
            break
        value //= size
    return f"in {value} {unit}" if seconds > 0 else f"{value} {unit} ago"


@_tool("Days in a month")
def days_in_month(date: str | None = None) -> str:
    """The number of days in the month of a date (this month if omitted).

    Args:
        date: 'YYYY-MM-DD', e.g. '2024-02-10'.
    """
    day = _parse_date(date) if date else datetime.now()
    return str(calendar.monthrange(day.year, day.month)[1])


@_tool("Unix timestamp in milliseconds")
def get_timestamp(time: str) -> str:
    """The Unix timestamp in milliseconds of a local time.

    Args:
        time: 'YYYY-MM-DD HH:mm:ss' or 'YYYY-MM-DD HH:mm:ss.SSS', e.g. '2025-03-23 12:30:00.000'.
    """
    return str((_parse_dt(time) - _EPOCH) // timedelta(milliseconds=1))


@_tool("Convert a time between time zones")
def convert_time(sourceTimezone: str, targetTimezone: str, time: str) -> str:
    """The wall-clock time in the target zone of a wall-clock time in the source zone,
    as 'YYYY-MM-DD HH:mm:ss'.

    Args:
        sourceTimezone: IANA time zone of ``time``, e.g. 'Asia/Shanghai'.
        targetTimezone: IANA time zone to convert to, e.g. 'Europe/London'.
        time: 'YYYY-MM-DD HH:mm:ss', e.g. '2025-03-23 12:30:00'.
    """
    source, target = _zone(sourceTimezone), _zone(targetTimezone)
    moment = _read(time, clock=True).replace(tzinfo=source)
    try:
        return _wall_clock(moment.astimezone(target))
    except (OverflowError, ValueError) as exc:
        raise _Refusal(f"cannot convert {time!r}: {exc}") from None


@_tool("Week number and ISO week number")
def get_week_year(date: str | None = None) -> str:
    """The week of the year of a date (today if omitted), answered as
    'week: W, isoWeek: I': W counts weeks starting on Monday (days before the first
    Monday are week 0), I is the ISO 8601 week number.

    Args:
        date: 'YYYY-MM-DD', e.g. '2023-01-09'.
    """
    day = _parse_date(date) if date else datetime.now()
    return f"week: {int(day.strftime('%W'))}, isoWeek: {day.isocalendar()[1]}"


# --- the server process ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the reference's flags and serve `app` (streamable HTTP by default, or stdio)."""
    parser = argparse.ArgumentParser(
        prog="python -m gem_core.compat.tools.mcp_server.time_mcp",
        description="The time MCP server of the reference GEM, on the official MCP SDK.",
    )
    parser.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="streamable-http",
        help="stdio, or streamable HTTP ('http' is the same; default)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind for HTTP (default: 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8081, help="HTTP port (default: 8081)")
    parser.add_argument(
        "--path", default="/time-mcp", help="HTTP endpoint path (default: /time-mcp)"
    )
    parser.add_argument(
        "--log-level",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        default="INFO",
        help="log level (default: INFO)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, got {args.port}")
    if not args.path.startswith("/"):
        parser.error(f"--path must start with '/', e.g. /time-mcp; got {args.path!r}")
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s - %(name)s - %(levelname)s - %(message)s"
    )
    app.settings.log_level = args.log_level
    if args.transport == "stdio":
        logger.info("serving the time MCP server over stdio")
        app.run(transport="stdio")
        return
    logger.info("serving the time MCP server at http://%s:%d%s", args.host, args.port, args.path)
    if _MCP1:
        app.settings.host, app.settings.port = args.host, args.port
        app.settings.streamable_http_path = args.path
        app.run(transport="streamable-http")
    else:
        app.run(
            transport="streamable-http",
            host=args.host,
            port=args.port,
            streamable_http_path=args.path,
        )


if __name__ == "__main__":
    main()
