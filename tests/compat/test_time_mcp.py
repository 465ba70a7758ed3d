"""gem_core.compat.tools.mcp_server.time_mcp: the reference's time MCP server on the official SDK.

The tools through real MCP clients (the SDK's in-memory transport; the ``__main__`` entry
over streamable HTTP on 127.0.0.1 and over stdio), the fastmcp-style ``get_tool``/``run`` calls, the
readers of tool input (shapes, messages, linear time) and the local-time arithmetic under
fixed ``TZ`` settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from pathlib import Path
from typing import Any

import pytest

from gem_core.errors import InvalidArgument

pytest.importorskip("mcp", reason='the MCP SDK is not installed: pip install "gem-core[mcp]"')

from gem_core.compat.tools.mcp_server import time_mcp  # noqa: E402
from gem_core.compat.tools.mcp_server.time_mcp import (  # noqa: E402
    _moment_to_strftime,
    _parse_date,
    _parse_dt,
    app,
)

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
TOOL_NAMES = {
    "convert_time",
    "current_time",
    "days_in_month",
    "get_timestamp",
    "get_week_year",
    "relative_time",
}


def run_tool(name: str, arguments: dict[str, Any] | None = None) -> str:
    """The text answer of ``await (await app.get_tool(name)).run(arguments)``."""

    async def call() -> str:
        tool = await app.get_tool(name)
        return (await tool.run(arguments or {})).content[0].text

    return asyncio.run(call())


def tool_error(name: str, arguments: dict[str, Any]) -> str:
    """The message of the error ``run`` raises (it must raise)."""
    with pytest.raises(Exception) as caught:
        run_tool(name, arguments)
    return str(caught.value)


@contextlib.asynccontextmanager
async def in_memory_client():
    """An initialized MCP client session on `app` over the SDK's in-memory transport."""
    try:
        from mcp import Client  # mcp >= 2
    except ImportError:  # mcp 1.x
        from mcp.shared.memory import create_connected_server_and_client_session

        async with create_connected_server_and_client_session(app) as session:
            yield session
        return
    async with Client(app) as client:
        yield client


def attr(obj: Any, snake: str, camel: str) -> Any:
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


@pytest.fixture
def local_zone(monkeypatch):
    """``set_zone(name)``: make ``name`` the process's local time zone (``TZ`` + tzset)."""
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is POSIX-only")

    def set_zone(name: str) -> None:
        if name != "UTC" and not Path("/usr/share/zoneinfo", name).exists():
            pytest.skip(f"the system has no tz data for {name} (/usr/share/zoneinfo)")
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


# --- a real MCP client ----------------------------------------------------------------------


def test_app_is_an_sdk_server_and_lists_and_calls_tools_over_the_in_memory_transport():
    try:
        from mcp.server.mcpserver import MCPServer as SDKServer
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as SDKServer
    assert isinstance(app, SDKServer)

    async def session_calls():
        async with in_memory_client() as client:
            listed = (await client.list_tools()).tools
            good = await client.call_tool("days_in_month", {"date": "2024-02-10"})
            bad = await client.call_tool("relative_time", {"time": "2024-02-10"})
            return listed, good, bad

    listed, good, bad = asyncio.run(session_calls())
    assert {tool.name for tool in listed} == TOOL_NAMES
    for tool in listed:
        assert attr(tool.annotations, "read_only_hint", "readOnlyHint") is True, tool.name
        assert tool.description, tool.name
    convert = next(tool for tool in listed if tool.name == "convert_time")
    assert attr(convert, "input_schema", "inputSchema")["required"] == [
        "sourceTimezone",
        "targetTimezone",
        "time",
    ]
    assert not attr(good, "is_error", "isError")
    assert good.content[0].text == "29"
    assert attr(bad, "is_error", "isError")
    assert "expected a time 'YYYY-MM-DD HH:mm:ss'" in bad.content[0].text
    assert "got '2024-02-10'" in bad.content[0].text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_main_serves_streamable_http_with_the_reference_flags(tmp_path):
    from gem_core.tools.mcp import MCPTool

    port = free_port()
    log = tmp_path / "server.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gem_core.compat.tools.mcp_server.time_mcp",
                "--transport",
                "streamable-http",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--path",
                "/time-mcp",
                "--log-level",
                "WARNING",
            ],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    tool = None
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"the server exited ({proc.returncode}):\n{log.read_text()}"
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"no listener on {port}:\n{log.read_text()}"
                time.sleep(0.05)
        tool = MCPTool(url=f"http://127.0.0.1:{port}/time-mcp", timeout=20, connect_timeout=20)
        assert {t["name"] for t in tool.list_tools()} == TOOL_NAMES
        call = tool.parse(
            '<tool_call><tool_name>convert_time</tool_name><arguments>{"sourceTimezone": '
            '"Asia/Shanghai", "targetTimezone": "Europe/London", "time": '
            '"2025-03-23 12:30:00"}</arguments></tool_call>'
        )
        result = tool.execute(call)
        assert (result.observation, result.error) == ("2025-03-23 04:30:00", False)
    finally:
        if tool is not None:
            tool.close()
        proc.kill()
        proc.wait(10)


def test_main_serves_stdio():
    from gem_core.tools.mcp import MCPTool

    module = "gem_core.compat.tools.mcp_server.time_mcp"
    args = ["-m", module, "--transport", "stdio", "--log-level", "WARNING"]
    tool = MCPTool(command=sys.executable, args=args, cwd=str(REPO), timeout=20)
    try:
        call = tool.parse(
            '<tool_call>{"name": "get_week_year", "arguments": {"date": "2025-03-23"}}</tool_call>'
        )
        result = tool.execute(call)
        assert (result.observation, result.error) == ("week: 11, isoWeek: 12", False)
        bad = tool.execute(
            tool.parse(
                '<tool_call>{"name": "get_timestamp", "arguments": {"time": "now"}}</tool_call>'
            )
        )
        assert bad.error and "expected a time 'YYYY-MM-DD HH:mm:ss'" in bad.observation
    finally:
        tool.close()


def test_main_parses_the_reference_flags_and_binds_loopback_by_default(monkeypatch, capsys):
    runs: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(app, "run", lambda transport, **kw: runs.append((transport, kw)))
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: None)
    monkeypatch.setattr(app.settings, "log_level", app.settings.log_level)
    if time_mcp._MCP1:
        for name in ("host", "port", "streamable_http_path"):
            monkeypatch.setattr(app.settings, name, getattr(app.settings, name))

    time_mcp.main([])
    time_mcp.main(["--transport", "http", "--port", "9001", "--path", "/t", "--log-level", "ERROR"])
    time_mcp.main(["--transport", "stdio"])
    if time_mcp._MCP1:  # mcp 1.x takes them through the settings
        assert (app.settings.host, app.settings.port) == ("127.0.0.1", 9001)
        assert [transport for transport, _ in runs] == ["streamable-http"] * 2 + ["stdio"]
    else:
        assert runs == [
            (
                "streamable-http",
                {"host": "127.0.0.1", "port": 8081, "streamable_http_path": "/time-mcp"},
            ),
            ("streamable-http", {"host": "127.0.0.1", "port": 9001, "streamable_http_path": "/t"}),
            ("stdio", {}),
        ]
    with pytest.raises(SystemExit):
        time_mcp.main(["--path", "time-mcp"])
    assert "--path must start with '/'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        time_mcp.main(["--port", "70000"])
    assert "--port must be in 1..65535, got 70000" in capsys.readouterr().err


def test_importing_the_module_leaves_the_root_logger_alone():
    # The SDK's server constructor calls logging.basicConfig; the module undoes it.
    code = (
        "import logging\n"
        "import gem_core.compat.tools.mcp_server.time_mcp\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), root.level)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", str(logging.WARNING)]


# --- get_tool / run -------------------------------------------------------------------------


def test_get_tool_runs_in_process_and_refuses_unknown_names():
    tool = asyncio.run(app.get_tool("get_week_year"))
    assert tool.name == "get_week_year" and "date" in tool.parameters["properties"]
    assert run_tool("get_week_year", {"date": "2023-01-01"}) == "week: 0, isoWeek: 52"
    message = tool_error("current_tim", {})
    assert "has no tool 'current_tim'. Did you mean 'current_time'?" in message
    assert "convert_time, current_time, days_in_month" in message


def test_run_raises_on_bad_arguments_with_the_reason():
    with pytest.raises(Exception) as caught:
        run_tool("get_timestamp", {"time": "yesterday"})
    assert isinstance(caught.value.__cause__, InvalidArgument)
    assert "expected a date 'YYYY-MM-DD'" in tool_error("days_in_month", {"date": "invalid-date"})
    assert "is not a valid date: day is out of range for month" in tool_error(
        "days_in_month", {"date": "2023-02-29"}
    )
    assert "unknown time zone 'Mars/Olympus'" in tool_error(
        "convert_time",
        {"sourceTimezone": "UTC", "targetTimezone": "Mars/Olympus", "time": "2023-01-01 12:00:00"},
    )
    assert "time" in tool_error("relative_time", {})  # missing argument: the SDK's schema check


# --- the tools ------------------------------------------------------------------------------


def test_current_time_formats_in_the_given_zone():
    before = datetime.now(dt_timezone.utc)
    text = run_tool("current_time", {"format": "YYYY-MM-DD HH:mm:ss", "timezone": "UTC"})
    after = datetime.now(dt_timezone.utc)
    parsed = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt_timezone.utc)
    assert before.replace(microsecond=0) <= parsed <= after
    shanghai = datetime.strptime(
        run_tool("current_time", {"format": "YYYY-MM-DD HH:mm", "timezone": "Asia/Shanghai"}),
        "%Y-%m-%d %H:%M",
    )
    offset = shanghai - datetime.now(dt_timezone.utc).replace(tzinfo=None)
    assert abs(offset - timedelta(hours=8)) < timedelta(minutes=2)
    assert time_mcp.current_time("YYYY", "UTC") == str(datetime.now(dt_timezone.utc).year)
    assert time_mcp.current_time("100% DD", "UTC").startswith("100% ")


def test_moment_tokens_longest_first_and_percent_literal():
    assert _moment_to_strftime("YYYY-MM-DD HH:mm:ss") == "%Y-%m-%d %H:%M:%S"
    assert _moment_to_strftime("MM/DD/YY") == "%m/%d/%y"
    assert _moment_to_strftime("h:mm:ss A") == "%-I:%M:%S %p"
    assert _moment_to_strftime("YYYYY") == "%YY"
    assert _moment_to_strftime("50% at %H") == "50%% at %%H"
    with pytest.raises(InvalidArgument, match="at most 256"):
        _moment_to_strftime("Y" * 257)


@pytest.mark.parametrize(
    "delta, expected",
    [
        (timedelta(seconds=90), "in 1 minutes"),
        (timedelta(seconds=-7200), "2 hours ago"),
        (timedelta(hours=25), "in 1 days"),
        (timedelta(days=45), "in 1 months"),
        (timedelta(days=-400), "1 years ago"),
    ],
)
def test_relative_time_rounds_down_to_the_largest_unit(delta, expected):
    # The local wall clock of the instant ``delta`` from now (right across a DST change too).
    instant = datetime.now(dt_timezone.utc).replace(microsecond=0) + delta
    target = instant.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert run_tool("relative_time", {"time": target}) == expected


def test_days_in_month_and_week_numbers():
    cases = {"1900-02-01": "28", "2000-02-15": "29", "2023-04-30": "30", "2023-12-01": "31"}
    for day, days in cases.items():
        assert time_mcp.days_in_month(day) == days, day
    assert 28 <= int(time_mcp.days_in_month()) <= 31
    assert time_mcp.get_week_year("2023-01-09") == "week: 2, isoWeek: 2"
    assert time_mcp.get_week_year("2021-01-03") == "week: 0, isoWeek: 53"
    assert time_mcp.get_week_year("2023-12-31") == "week: 52, isoWeek: 52"


def test_convert_time_between_zones():
    assert (
        time_mcp.convert_time("UTC", "America/New_York", "2023-01-01 17:00:00")
        == "2023-01-01 12:00:00"
    )
    assert (
        time_mcp.convert_time("UTC", "America/New_York", "2023-07-01 17:00:00")
        == "2023-07-01 13:00:00"
    )
    assert (
        time_mcp.convert_time("UTC", "Pacific/Auckland", "2023-12-31 23:30:00")
        == "2024-01-01 12:30:00"
    )
    # Etc/GMT-3 is UTC+3 at every date; a year before 1000 keeps its four digits.
    assert (
        time_mcp.convert_time("Etc/GMT-3", "UTC", "0999-01-01 03:00:00.5") == "0999-01-01 00:00:00"
    )
    with pytest.raises(InvalidArgument, match="unknown time zone 'America'"):
        time_mcp.convert_time("America", "UTC", "2023-01-01 00:00:00")


def test_local_time_takes_the_offset_of_its_own_date(local_zone):
    local_zone("Europe/Berlin")
    assert _parse_dt("2023-01-15 12:00:00").utcoffset() == timedelta(hours=1)
    assert _parse_dt("2023-07-15 12:00:00").utcoffset() == timedelta(hours=2)
    assert _parse_date("2023-07-15").utcoffset() == timedelta(hours=2)
    assert time_mcp.get_timestamp("2023-07-15 12:00:00") == "1689415200000"  # 10:00 UTC


def test_get_timestamp_counts_milliseconds_exactly(local_zone):
    local_zone("UTC")
    assert time_mcp.get_timestamp("1970-01-01 00:00:00") == "0"
    assert time_mcp.get_timestamp("2023-01-01 00:00:00") == "1672531200000"
    # Float seconds times 1000 gives ...732 here.
    assert time_mcp.get_timestamp("2038-06-19 15:11:36.733") == "2160573096733"
    assert time_mcp.get_timestamp("1969-12-31 23:59:59.999") == "-1"


# --- readers of tool input ------------------------------------------------------------------


def test_readers_take_the_shapes_strptime_took():
    assert _parse_dt("2023-1-2 3:4:5").timetuple()[:6] == (2023, 1, 2, 3, 4, 5)
    assert _parse_dt("2023-01-01 12:30:45.1").microsecond == 100000
    assert _parse_dt("2023-01-01 12:30:45.1234567").microsecond == 123456
    assert _parse_dt(" 2023-01-01 12:30:45 ").second == 45
    day = _parse_date("2024-02-29")
    assert (day.year, day.month, day.day, day.hour, day.minute) == (2024, 2, 29, 0, 0)
    assert day.tzinfo is not None


@pytest.mark.parametrize(
    "reader, text, message",
    [
        (_parse_dt, "invalid-date", "expected a time 'YYYY-MM-DD HH:mm:ss'"),
        (_parse_dt, "2023-01-01", "got '2023-01-01'"),
        (_parse_dt, "2023-01-01T12:00:00", "expected a time"),
        (_parse_dt, "2023-01-01 12:00", "expected a time"),
        (_parse_dt, "2023-01-01 12:00:00.", "expected a time"),
        (_parse_dt, "2023-01-01 12:00:00.5x", "expected a time"),
        (_parse_dt, "23-01-01 12:00:00", "expected a time"),
        (_parse_dt, "2023-001-01 12:00:00", "expected a time"),
        (_parse_dt, "２０２３-01-01 12:00:00", "expected a time"),  # full-width digits
        (_parse_dt, "2023-01-01 24:00:00", "is not a valid time: hour must be in 0..23"),
        (_parse_dt, "0000-01-01 00:00:00", "is not a valid time: year 0 is out of range"),
        (_parse_dt, 20230101, "as a string, got int"),
        (_parse_date, "2023-01-01 00:00:00", "expected a date 'YYYY-MM-DD'"),
        (_parse_date, "2023/01/01", "expected a date"),
        (_parse_date, "2023-13-01", "is not a valid date: month must be in 1..12"),
        (_parse_date, "2023-01-01" + " " * 100, "a text of 110 characters (at most 64)"),
    ],
)
def test_readers_refuse_bad_input_with_the_expected_shape(reader, text, message):
    with pytest.raises(InvalidArgument) as caught:
        reader(text)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_readers_are_fast_on_huge_hostile_input():
    hostile = [
        "1" * 10**6,
        "-" * 10**6,
        "2023-01-01 " + ":" * 10**6,
        "9" * 10**6 + ".",
        " " * 10**6,
    ]
    for text in hostile:
        for reader in (_parse_dt, _parse_date, time_mcp._zone, _moment_to_strftime):
            start = time.perf_counter()
            with pytest.raises(InvalidArgument):
                reader(text)
            assert time.perf_counter() - start < 0.1, (reader.__name__, text[:20])
