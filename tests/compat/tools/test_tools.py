"""gem_core.compat.tools: the reference ToolEnvWrapper counters/rewards and tool arguments."""

from __future__ import annotations

import pytest

import gem_core.compat as gem
from gem_core.compat.tools.base_tool import BaseTool, LegacyTool, as_tool
from gem_core.compat.tools.python_code_tool import PythonCodeTool
from gem_core.compat.tools.search_tool import SearchTool
from gem_core.compat.tools.tool_env_wrapper import ToolEnvWrapper
from gem_core.compat.wrappers.wrapper_factory import get_wrapper_fns

GUESS = "game:GuessTheNumber-v0-easy"


@pytest.fixture
def python_env():
    env = get_wrapper_fns("python_tool")[0](gem.make(GUESS, seed=0, max_turns=4))
    yield env
    env.close()


def test_python_tool_preset_counters_and_rewards(python_env):
    env = python_env
    obs, info = env.reset()
    assert {k: info[k] for k in ("tool_use_counter", "tool_success_counter", "prev_ep_tool_use_counter",
                                 "prev_ep_tool_success_counter", "use_tool")} == {
        "tool_use_counter": 0, "tool_success_counter": 0, "prev_ep_tool_use_counter": 0,
        "prev_ep_tool_success_counter": 0, "use_tool": False}
    obs, reward, terminated, truncated, info = env.step("think <python>print(1+1)</python> tail")
    assert obs.startswith("Code execution result: 2")
    assert reward == pytest.approx(0.3)  # tool_reward 0.05 + tool_success_reward 0.25
    assert (terminated, truncated) == (False, False)
    assert info["tool_type"] == "python_code" and info["use_tool"] is True
    assert info["parsed_action"] == "think <python>print(1+1)</python>"
    assert (info["tool_use_counter"], info["tool_success_counter"]) == (1, 1)
    _, reward, *_, info = env.step("<python>raise SystemExit(3)</python>")
    assert reward == pytest.approx(0.05)  # found but failed: tool_reward only
    assert (info["tool_use_counter"], info["tool_success_counter"]) == (2, 1)
    _, _, _, _, info = env.step("\\boxed{2}")
    assert info["use_tool"] is False and info["tool_use_counter"] == 2  # a task turn
    _, info = env.reset()
    assert (info["prev_ep_tool_use_counter"], info["prev_ep_tool_success_counter"]) == (2, 1)
    assert env.tool_use_counter == 0


def test_over_the_limit_actions_go_to_the_env():
    env = ToolEnvWrapper(gem.make(GUESS, seed=0), [PythonCodeTool(timeout=5)], max_tool_uses=1)
    try:
        env.reset()
        assert env.step("<python>print(1)</python>")[4]["use_tool"]
        _, _, _, _, info = env.step("<python>print(1)</python> \\boxed{3}")
        assert info["use_tool"] is False and "turn" in info  # the task env got it
    finally:
        env.close()


def test_tool_execute_error_reward():
    env = ToolEnvWrapper(gem.make(GUESS, seed=0), [PythonCodeTool(timeout=5)],
                         tool_execute_error_reward=-0.5)
    try:
        env.reset()
        assert env.step("<python>1/0</python>")[1] == pytest.approx(-0.5)
        assert env.step("<python>print(0)</python>")[1] == 0.0
    finally:
        env.close()


def test_python_code_tool_reference_methods():
    tool = PythonCodeTool(timeout=5, sandbox_type="bwrap", keep_error_last_line=True)
    try:
        assert tool.timeout == 5 and tool.timeout_s == 5.0 and tool.tool_type == "python_code"
        assert "python" in tool.instruction_string().lower()
        valid, error, obs, parsed = tool.execute_action("a ```python\nprint('hi')\n``` b")
        assert (valid, error, parsed) == (True, False, "a ```python\nprint('hi')\n```")
        assert obs == "Code execution result: hi\n\n"
        valid, error, obs, _ = tool.execute_action("<python>1/0</python>")
        assert valid and error and obs.strip().endswith("ZeroDivisionError: division by zero")
        assert tool.execute_action("no code") == (False, True, "", "no code")
    finally:
        tool.close()


def test_search_tool_url_env_fallback(monkeypatch):
    from gem_core.errors import DependencyNotInstalled
    from gem_core.search.http import _msgpack

    monkeypatch.setenv("SEARCH_URL", "http://127.0.0.1:9/retrieve")
    if _msgpack() is None:  # the reference server speaks msgpack: a clear error, not JSON
        with pytest.raises(DependencyNotInstalled, match="pip install msgpack"):
            SearchTool(topk=2, timeout=1)
    else:
        tool = SearchTool(topk=2, timeout=1)
        assert tool.backend.encoding == "msgpack"
        tool.close()
    tool = SearchTool(topk=2, timeout=1, encoding="json")
    assert tool.backend_name == "http" and tool.search_url == "http://127.0.0.1:9/retrieve"
    assert tool.topk == 2 and tool.tool_type == "search"
    tool.close()
    explicit = SearchTool(search_url="http://127.0.0.1:9/other", encoding="json")
    assert explicit.search_url.endswith("/other")
    explicit.close()


def test_search_tool_without_url_uses_the_demo_corpus(monkeypatch):
    monkeypatch.delenv("SEARCH_URL", raising=False)
    tool = SearchTool(topk=1)
    try:
        assert tool.search_url is None and tool.backend_name == "index"
        assert tool.execute_action("nothing") == (False, True, "", "")
        valid, error, obs, parsed = tool.execute_action("x <search>capital of France</search> y")
        assert valid and not error and obs.startswith("<information>")
        assert parsed == "x <search>capital of France</search>"
        assert "search" in tool.instruction_string()
    finally:
        tool.close()


class EchoRefTool:
    """A reference-style tool (ROLL's MCP tool shape): execute_action + instruction_string."""

    tool_type = "echo"

    def __init__(self):
        self.calls = 0
        self.closed = False

    def instruction_string(self):
        return "Say <echo>text</echo>."

    def execute_action(self, action):
        start, end = action.find("<echo>"), action.find("</echo>")
        if start < 0 or end < start:
            return False, True, "", action
        self.calls += 1
        text = action[start + 6:end]
        return True, text == "fail", f"echo: {text}", action[: end + 7]

    def close(self):
        self.closed = True


class ParsingRefTool(EchoRefTool):
    """Also has the reference's _parse_action, so parse does not execute."""

    def _parse_action(self, action):
        end = action.find("</echo>")
        return None, action[: end + 7], end >= 0


@pytest.mark.parametrize("cls", [EchoRefTool, ParsingRefTool])
def test_reference_style_tool_in_the_wrapper(cls):
    ref = cls()
    env = ToolEnvWrapper(gem.make(GUESS, seed=0), [ref], tool_reward=0.1, tool_success_reward=0.2)
    obs, _ = env.reset()
    assert obs.endswith("Say <echo>text</echo>.")
    obs, reward, _, _, info = env.step("<echo>hi</echo> rest")
    assert obs == "echo: hi" and reward == pytest.approx(0.3) and info["tool_type"] == "echo"
    assert info["parsed_action"] == "<echo>hi</echo>" and ref.calls == 1  # executed once
    _, reward, _, _, info = env.step("<echo>fail</echo>")
    assert reward == pytest.approx(0.1) and info["tool_success_counter"] == 1
    env.close()
    assert ref.closed


def test_base_tool_subclass_and_bad_tools():
    class Upper(BaseTool):
        tool_type = "upper"

        def instruction_string(self):
            return "Write UP:text"

        def execute_action(self, action):
            ok = action.startswith("UP:")
            return ok, False, action[3:].upper() if ok else "", action

    tool = as_tool(Upper())
    assert tool.name == "upper" and tool.instruction() == "Write UP:text"
    call = tool.parse("UP:abc")
    assert tool.execute(call).observation == "ABC" and tool.parse("down") is None
    assert isinstance(as_tool(EchoRefTool()), LegacyTool)
    with pytest.raises(TypeError, match="execute_action"):
        ToolEnvWrapper(gem.make(GUESS), [object()])
