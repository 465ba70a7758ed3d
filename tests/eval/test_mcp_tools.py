"""`gem eval --tools mcp:CONFIG`: MCP servers from a JSON config, calls routed to the server with the tool."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP tool needs gem-core[mcp]")

from gem_core.cli import main  # noqa: E402
from tests.tools.test_mcp import SECOND_SERVER, SERVER  # noqa: E402

GTN = "game:GuessTheNumber-v0-easy"


def test_cli_eval_with_two_mcp_servers_routes_calls(server, tmp_path, capsys):
    (tmp_path / "a.py").write_text(SERVER)
    (tmp_path / "b.py").write_text(SECOND_SERVER)
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {
        "calc": {"command": sys.executable, "args": [str(tmp_path / "a.py")]},
        "mul": {"command": sys.executable, "args": [str(tmp_path / "b.py")], "timeout": 20},
    }}))

    def reply(messages):
        if len(messages) == 1:
            return '<tool_call>{"name": "multiply", "arguments": {"a": 2, "b": 3}}</tool_call>'
        if len(messages) == 3:
            return '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
        return "\\boxed{5}"

    server.chat_reply = reply
    out = tmp_path / "run"
    rc = main(["eval", GTN, "--api", "chat", "--base-url", server.base_url, "--model", "tiny",
               "--tools", f"mcp:{config}", "--episodes", "1", "--max-turns", "4", "--out", str(out),
               "--no-progress", "--concurrency", "1"])
    assert rc in (0, 1), capsys.readouterr().err
    (rec,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert rec["error"] is None
    assert rec["tool_calls"] == {"mcp:calc": 1, "mcp:mul": 1}
    assert rec["observations"][1] == "6" and rec["observations"][2] == "5"
    first_prompt = server.answers[0][0]["messages"][0]["content"]
    assert '"name": "multiply"' in first_prompt and '"name": "add"' in first_prompt


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the MCP config"),
        ("{not json", "the MCP config is not valid JSON"),
        ('{"mcpServers": {}}', "with no servers"),
        ('{"mcpServers": {"x": {"args": ["a"]}}}', "needs exactly one of \"command\" (stdio) or \"url\""),
        ('{"mcpServers": {"x": {"command": "c", "argz": []}}}', "unknown field(s) ['argz']"),
        ('{"mcpServers": {"shop": {"command": "no-such-server-zz"}}}',
         "server 'shop': its command 'no-such-server-zz' is not found on PATH"),
        ('{"mcpServers": {"shop": {"command": "/nonexistent/bin/srv", "args": ["-v"]}}}',
         "server 'shop': its command '/nonexistent/bin/srv' is not an executable file"),
        ('{"mcpServers": {"shop": {"command": "python3", "cwd": "/nonexistent/dir"}}}',
         "server 'shop': its cwd '/nonexistent/dir' is not a directory"),
    ],
)
def test_bad_mcp_configs_are_refused_before_the_run(tmp_path, capsys, content, message):
    config = tmp_path / "servers.json"
    if content is not None:
        config.write_text(content)
    assert main(["eval", GTN, "--api", "chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--tools", f"mcp:{config}", "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "cannot reach" not in err
    assert main(["eval", GTN, "--api", "chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--tools", "mcp", "--out", str(tmp_path / "run2"), "--no-progress"]) == 2
    assert "--tools mcp needs a config file: mcp:CONFIG" in capsys.readouterr().err


def test_eval_help_lists_mcp_config_under_tools(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "tools: python, search[:INDEX], mcp:CONFIG (a JSON file of MCP servers" in text
