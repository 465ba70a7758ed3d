"""Tests for gem_core.tools.MCPTool against real MCP servers (stdio and streamable HTTP)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gem_core.errors import DependencyNotInstalled, install_command

pytest.importorskip("mcp", reason='the MCP SDK is not installed: pip install "gem-core[mcp]"')

from gem_core.tools import ToolEnvWrapper  # noqa: E402
from gem_core.tools.mcp import MCPConnectionError, MCPTool  # noqa: E402

pytestmark = pytest.mark.timeout(60)

SERVER = textwrap.dedent(
    '''
    """A small MCP server for the tests (mcp 2.x MCPServer, or 1.x FastMCP)."""
    import asyncio
    import os
    import sys

    try:
        from mcp.server.mcpserver import MCPServer as Server
    except ImportError:
        from mcp.server.fastmcp import FastMCP as Server

    if os.environ.get("PIDFILE"):
        with open(os.environ["PIDFILE"], "w") as f:
            f.write(str(os.getpid()))

    app = Server("gem-test")


    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b


    @app.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text


    @app.tool()
    def fail(message: str) -> str:
        """Always raises."""
        raise ValueError(message)


    @app.tool()
    async def sleep(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return "slept"


    @app.tool()
    def crash() -> str:
        """Kill the server process."""
        os._exit(3)


    if __name__ == "__main__":
        if len(sys.argv) > 1:
            port = int(sys.argv[1])
            try:
                app.run(transport="streamable-http", host="127.0.0.1", port=port)
            except TypeError:  # mcp 1.x: host and port are settings
                app.settings.host, app.settings.port = "127.0.0.1", port
                app.run(transport="streamable-http")
        else:
            app.run()
    '''
)

ADD = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'


def call(tool: MCPTool, action: str):
    parsed = tool.parse(action)
    assert parsed is not None, f"no call parsed from {action!r}"
    return tool.execute(parsed)


@pytest.fixture(scope="module")
def server_script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "server.py"
    path.write_text(SERVER)
    return path


@pytest.fixture(scope="module")
def stdio_tool(server_script):
    tool = MCPTool(command=sys.executable, args=[str(server_script)], timeout=10)
    yield tool
    tool.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http_server(script: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the MCP HTTP server exited with code {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the MCP HTTP server did not listen on port {port} within 20 s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


@pytest.fixture(scope="module")
def http_server(server_script):
    port = free_port()
    proc = start_http_server(server_script, port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


# --- parsing (no server needed) ------------------------------------------------------
@pytest.fixture
def offline_tool():
    tool = MCPTool(url="http://127.0.0.1:9/mcp")  # never contacted by parse
    yield tool
    tool.close()


def test_parse_json_and_xml_forms(offline_tool):
    c = offline_tool.parse(f"I will add. {ADD} then answer")
    assert c.payload == {"name": "add", "arguments": {"a": 2, "b": 3}, "error": None}
    assert c.raw == ADD and c.tool == "mcp"
    xml = '<tool_call>\n<tool_name>add</tool_name>\n<arguments>\n{"a": 1, "b": 2}\n</arguments>\n</tool_call>'
    assert offline_tool.parse(xml).payload == {
        "name": "add",
        "arguments": {"a": 1, "b": 2},
        "error": None,
    }
    string_args = '<tool_call>{"name": "echo", "arguments": "{\\"text\\": \\"hi\\"}"}</tool_call>'
    assert offline_tool.parse(string_args).payload["arguments"] == {"text": "hi"}
    # The earliest block wins; a block cut at the stop string still counts.
    assert (
        offline_tool.parse(ADD + '<tool_call>{"name": "echo"}</tool_call>').payload["name"] == "add"
    )
    assert (
        offline_tool.parse('<tool_call>{"name": "echo", "arguments": {"text": "x"}}').payload[
            "name"
        ]
        == "echo"
    )


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ('<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>', "invalid JSON"),
        ("<tool_call></tool_call>", "the <tool_call> block is empty"),
        ('<tool_call>["add"]</tool_call>', "expected a JSON object, got list"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'the JSON object needs a "name" string'),
        (
            '<tool_call>{"name": "add", "arguments": [1]}</tool_call>',
            '"arguments" must be a JSON object',
        ),
        (
            "<tool_call><tool_name>add</tool_name><arguments>{oops}</arguments></tool_call>",
            "not valid JSON",
        ),
        ("<tool_call><foo/></tool_call>", "expected <tool_name>NAME</tool_name>"),
    ],
)
def test_malformed_calls_parse_with_an_error(offline_tool, action, error):
    parsed = offline_tool.parse(action)
    assert parsed is not None and error in parsed.payload["error"]
    result = offline_tool.execute(parsed)  # no server contact for a malformed call
    assert result.error and result.observation.startswith(
        "MCP error: could not read the tool call:"
    )
    assert error in result.observation


DEEP = 100_000


@pytest.mark.parametrize(
    "action",
    [
        "<tool_call>" + "[" * DEEP + "</tool_call>",
        "<tool_call>" + "[" * DEEP,  # cut at the stop string
        '<tool_call>{"name": "add", "arguments": ' + '{"a": ' * DEEP + "1</tool_call>",
        # arguments sent as a JSON-encoded string that nests deep once decoded
        '<tool_call>{"name": "add", "arguments": "' + "[" * DEEP + '"}</tool_call>',
        "<tool_call><tool_name>add</tool_name><arguments>"
        + '{"a": [' * DEEP
        + "</arguments></tool_call>",
    ],
    ids=["array", "unclosed", "arguments", "string-arguments", "xml-arguments"],
)
def test_deeply_nested_json_is_an_error_observation_not_a_crash(offline_tool, action):
    """Regression: ~100k nested brackets made parse raise RecursionError out of env.step."""
    parsed = offline_tool.parse(action)
    assert parsed is not None
    assert "levels deep; at most 64 levels are allowed" in parsed.payload["error"]
    result = offline_tool.execute(parsed)  # a malformed call never reaches the server
    assert result.error and result.info == {"reason": "bad_call"}
    assert result.observation.startswith("MCP error: could not read the tool call: ")
    assert "levels deep" in result.observation


def test_json_within_the_limits_still_parses(offline_tool):
    nested = '{"a": ' * 63 + "1" + "}" * 63  # 63 levels + the call object = 64
    parsed = offline_tool.parse('<tool_call>{"name": "add", "arguments": ' + nested + "}</tool_call>")
    assert parsed.payload["error"] is None and parsed.payload["name"] == "add"
    text = "[{" * 5000 + '\\"]\\'  # brackets, escaped quotes and backslashes in a string
    parsed = offline_tool.parse(
        "<tool_call>" + json.dumps({"name": "echo", "arguments": {"text": text}}) + "</tool_call>"
    )
    assert parsed.payload["error"] is None and parsed.payload["arguments"] == {"text": text}


def test_oversized_json_is_refused_before_decoding(offline_tool):
    big = '<tool_call>{"name": "echo", "arguments": {"text": "' + "x" * 1_000_000 + '"}}</tool_call>'
    parsed = offline_tool.parse(big)
    assert "characters; at most 1000000 are allowed" in parsed.payload["error"]


def test_deep_call_through_the_wrapper_is_a_tool_error_turn(offline_tool, monkeypatch):
    from gem_core.envs.games.guess_the_number import GuessTheNumberEnv

    monkeypatch.setattr(offline_tool, "instruction", lambda: "")  # no server to list tools
    env = ToolEnvWrapper(
        GuessTheNumberEnv(min_number=1, max_number=10), [offline_tool], close_tools=False
    )
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<tool_call>" + "[" * DEEP)
    assert obs.startswith("MCP error: could not read the tool call: the JSON nests")
    assert info["use_tool"] and info["tool_error"] and (reward, terminated, truncated) == (
        0.0,
        False,
        False,
    )
    assert env.unwrapped.turn == 0


def test_no_tag_is_no_call(offline_tool):
    for action in ["", "plain answer \\boxed{3}", '{"name": "add"}', None, 5]:
        assert offline_tool.parse(action) is None  # type: ignore[arg-type]


def test_constructor_checks():
    with pytest.raises(
        ValueError, match=r"exactly one server: command=\.\.\. \(stdio\) or url=\.\.\."
    ):
        MCPTool()
    with pytest.raises(ValueError, match="exactly one server"):
        MCPTool(command="x", url="http://y")
    with pytest.raises(TypeError, match="args must be a list of strings"):
        MCPTool(command="python", args="server.py")  # type: ignore[arg-type]


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(
        DependencyNotInstalled,
        match=r"for MCP tools\. Install it with: " + re.escape(install_command("mcp")),
    ):
        MCPTool(command="python")


# --- stdio -----------------------------------------------------------------------------
def test_stdio_instruction_lists_tools(stdio_tool):
    text = stdio_tool.instruction()
    assert '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>' in text
    assert "<tool_name>tool_name</tool_name>" in text
    functions = [
        json.loads(line) for line in text.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    ]
    by_name = {f["function"]["name"]: f["function"] for f in functions}
    assert set(by_name) == {"add", "echo", "fail", "sleep", "crash"}
    assert by_name["add"]["description"] == "Add two integers."
    assert by_name["add"]["parameters"]["required"] == ["a", "b"]
    assert by_name["add"]["parameters"]["properties"]["a"]["type"] == "integer"


def test_stdio_successful_calls_in_both_forms(stdio_tool):
    result = call(stdio_tool, ADD)
    assert (result.observation, result.error) == ("5", False)
    xml = (
        '<tool_call><tool_name>echo</tool_name><arguments>{"text": "héllo"}</arguments></tool_call>'
    )
    assert call(stdio_tool, xml).observation == "héllo"


def test_stdio_unknown_tool(stdio_tool):
    result = call(stdio_tool, '<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    assert result.error and result.info["reason"] == "unknown_tool"
    assert (
        result.observation
        == "MCP error: unknown tool 'nope'. Available tools: add, crash, echo, fail, sleep."
    )


def test_stdio_bad_arguments(stdio_tool):
    result = call(stdio_tool, '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    assert (
        result.error
        and "invalid arguments for 'add': missing required argument(s) 'b'" in result.observation
    )
    result = call(
        stdio_tool, '<tool_call>{"name": "add", "arguments": {"a": "x", "b": 1}}</tool_call>'
    )
    assert "'a' must be of type integer, got str" in result.observation


def test_stdio_tool_that_raises(stdio_tool):
    result = call(
        stdio_tool, '<tool_call>{"name": "fail", "arguments": {"message": "kaput"}}</tool_call>'
    )
    assert result.error and result.info["reason"] == "tool_error"
    assert result.observation.startswith("MCP error: 'fail' raised an error:")
    assert call(stdio_tool, ADD).observation == "5", "the session did not survive a tool error"


def test_stdio_one_session_for_many_calls(stdio_tool):
    call(stdio_tool, ADD)
    conn = stdio_tool._conn
    for _ in range(5):
        call(stdio_tool, ADD)
    assert stdio_tool._conn is conn, "a new session was opened for a call"


def test_stdio_timeout_resets_the_session(server_script):
    tool = MCPTool(command=sys.executable, args=[str(server_script)], timeout=1.0)
    try:
        assert call(tool, ADD).observation == "5"  # the session is open: only the call is timed
        t0 = time.monotonic()
        result = call(
            tool, '<tool_call>{"name": "sleep", "arguments": {"seconds": 30}}</tool_call>'
        )
        assert time.monotonic() - t0 < 8  # quiet: 1.2 s (2.0-2.3 s with the session's start)
        assert result.error and result.info["reason"] == "timeout"
        assert result.observation == "MCP error: 'sleep' timed out after 1s; the session was reset."
        assert call(tool, ADD).observation == "5"
    finally:
        tool.close()


def test_stdio_server_killed_mid_episode_recovers(server_script, tmp_path):
    pidfile = tmp_path / "pid"
    tool = MCPTool(
        command=sys.executable, args=[str(server_script)], env={"PIDFILE": str(pidfile)}, timeout=10
    )
    try:
        assert call(tool, ADD).observation == "5"
        # The server dies during a call: that call is an error, the next one recovers.
        result = call(tool, '<tool_call>{"name": "crash", "arguments": {}}</tool_call>')
        assert result.error and result.info["reason"] == "connection_lost"
        assert "connection to the server was lost during 'crash'" in result.observation
        assert "a new session will be opened on the next call" in result.observation
        assert call(tool, ADD).observation == "5"
        # Killed from outside while idle: at most one error, then a new session.
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
        time.sleep(0.2)
        results = [call(tool, ADD) for _ in range(2)]
        assert results[-1].observation == "5" and not results[-1].error
        assert all(r.observation == "5" or r.info["reason"] == "connection_lost" for r in results)
    finally:
        tool.close()


def test_stdio_server_that_cannot_start(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("import sys; sys.exit(2)\n")
    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed below
    tool = MCPTool(
        command=sys.executable,
        args=[str(script)],
        max_retries=1,
        retry_delay=0.05,
        connect_timeout=5,
        errlog=devnull,
    )
    try:
        result = call(tool, ADD)
        assert result.error and result.info["reason"] == "connect"
        assert result.observation.startswith(
            "MCP error: could not open an MCP session with the stdio server"
        )
        assert "after 2 tries" in result.observation
        with pytest.raises(MCPConnectionError, match="could not open an MCP session"):
            tool.instruction()
    finally:
        tool.close()
        devnull.close()


def test_close_twice_and_reopen(server_script):
    tool = MCPTool(command=sys.executable, args=[str(server_script)])
    assert call(tool, ADD).observation == "5"
    thread = tool._thread
    tool.close()
    tool.close()
    assert thread is not None and not thread.is_alive()
    assert call(tool, ADD).observation == "5", "a closed tool did not reopen on use"
    tool.close()


# --- streamable HTTP -----------------------------------------------------------------
def test_http_calls(http_server):
    tool = MCPTool(url=http_server, timeout=10)
    try:
        assert '"name": "add"' in tool.instruction()
        assert call(tool, ADD).observation == "5"
        assert (
            call(tool, '<tool_call>{"name": "nope", "arguments": {}}</tool_call>').info["reason"]
            == "unknown_tool"
        )
        assert (
            call(tool, '<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>').info[
                "reason"
            ]
            == "bad_call"
        )
        result = call(
            tool, '<tool_call>{"name": "fail", "arguments": {"message": "kaput"}}</tool_call>'
        )
        assert result.error and result.info["reason"] == "tool_error"
        assert call(tool, ADD).observation == "5"
    finally:
        tool.close()


def test_http_timeout(http_server):
    tool = MCPTool(url=http_server, timeout=1.0)
    try:
        result = call(
            tool, '<tool_call>{"name": "sleep", "arguments": {"seconds": 30}}</tool_call>'
        )
        assert result.error and result.info["reason"] == "timeout"
        assert call(tool, ADD).observation == "5"
    finally:
        tool.close()


def test_http_server_killed_mid_episode_then_restarted(server_script):
    port = free_port()
    proc = start_http_server(server_script, port)
    tool = MCPTool(
        url=f"http://127.0.0.1:{port}/mcp",
        timeout=5,
        connect_timeout=3,
        max_retries=1,
        retry_delay=0.05,
    )
    try:
        assert call(tool, ADD).observation == "5"
        stop(proc)
        t0 = time.monotonic()
        down = [call(tool, ADD) for _ in range(2)]
        assert time.monotonic() - t0 < 15, "calls to a dead server hang"
        assert all(r.error for r in down)
        assert down[-1].info["reason"] == "connect"
        assert (
            f"could not open an MCP session with http://127.0.0.1:{port}/mcp"
            in down[-1].observation
        )
        proc = start_http_server(server_script, port)
        assert call(tool, ADD).observation == "5", "no recovery after the server came back"
    finally:
        tool.close()
        stop(proc)


# --- through the wrapper ---------------------------------------------------------------
def test_mcp_tool_in_tool_env_wrapper(stdio_tool):
    from gem_core.envs.games.guess_the_number import GuessTheNumberEnv

    env = ToolEnvWrapper(
        GuessTheNumberEnv(min_number=1, max_number=10), [stdio_tool], close_tools=False
    )
    obs, _ = env.reset(seed=0)
    assert "<tools>" in obs and '"name": "add"' in obs
    obs, reward, terminated, truncated, info = env.step(f"Let me compute. {ADD}")
    assert obs == "5" and info["use_tool"] and info["tool_name"] == "mcp" and not info["tool_error"]
    obs, *_, info = env.step('<tool_call>{"name": "nope"}</tool_call>')
    assert info["use_tool"] and info["tool_error"] and "unknown tool 'nope'" in obs
    assert env.unwrapped.turn == 0
    env.close()


SECOND_SERVER = textwrap.dedent(
    '''
    """A second MCP server with other tools."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
    except ImportError:
        from mcp.server.fastmcp import FastMCP as Server

    app = Server("gem-test-2")


    @app.tool()
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b


    if __name__ == "__main__":
        app.run()
    '''
)


def test_two_mcp_servers_in_one_wrapper_route_each_call_to_its_server(server_script, tmp_path):
    from gem_core.envs.games.guess_the_number import GuessTheNumberEnv

    second = tmp_path / "second.py"
    second.write_text(SECOND_SERVER)
    first_tool = MCPTool(command=sys.executable, args=[str(server_script)], name="mcp:a", timeout=10)
    second_tool = MCPTool(command=sys.executable, args=[str(second)], name="mcp:b", timeout=10)
    env = ToolEnvWrapper(GuessTheNumberEnv(min_number=1, max_number=10), [first_tool, second_tool])
    try:
        obs, _ = env.reset(seed=0)
        assert '"name": "add"' in obs and '"name": "multiply"' in obs
        obs, *_, info = env.step('<tool_call>{"name": "multiply", "arguments": {"a": 6, "b": 7}}</tool_call>')
        assert obs == "42" and info["tool_name"] == "mcp:b" and not info["tool_error"], obs
        obs, *_, info = env.step(ADD)
        assert obs == "5" and info["tool_name"] == "mcp:a" and not info["tool_error"], obs
        obs, *_, info = env.step('<tool_call>{"name": "divide", "arguments": {}}</tool_call>')
        assert info["use_tool"] and info["tool_error"] and info["tool_info"]["reason"] == "unknown_tool"
        assert "unknown tool 'divide'" in obs and "multiply (on mcp:b)" in obs and "add, crash" in obs
        # A malformed call is answered by the first server (as with one server).
        obs, *_, info = env.step("<tool_call>{not json</tool_call>")
        assert info["tool_name"] == "mcp:a" and "could not read the tool call" in obs
        assert env.unwrapped.turn == 0 and env.tool_uses == 4
    finally:
        env.close()


def test_a_down_server_does_not_take_calls_meant_for_another(server_script, tmp_path):
    from gem_core.envs.games.guess_the_number import GuessTheNumberEnv

    down = MCPTool(command=sys.executable, args=[str(tmp_path / "missing.py")], name="mcp:down",
                   connect_timeout=5, max_retries=0, errlog=open(os.devnull, "w"))  # noqa: SIM115
    up = MCPTool(command=sys.executable, args=[str(server_script)], name="mcp:up", timeout=10)
    env = ToolEnvWrapper(GuessTheNumberEnv(min_number=1, max_number=10), [down, up])
    try:
        with pytest.raises(MCPConnectionError):
            env.reset(seed=0)  # the instructions need every server's tool list
        # Mid-episode (the server died after reset): the reachable server's tool still goes
        # to it although the down server comes first; a call no one can place goes to the
        # down server, which says why it cannot run it.
        env.env.reset(seed=0)
        env._live = True
        obs, *_, info = env.step(ADD)
        assert obs == "5" and info["tool_name"] == "mcp:up", obs
        obs, *_, info = env.step('<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
        assert info["tool_name"] == "mcp:down" and info["tool_info"]["reason"] == "connect", obs
    finally:
        env.close()
