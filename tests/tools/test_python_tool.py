"""Tests of `PythonCodeTool`: parsing, the observation format, persistent sessions, lifecycle."""

from __future__ import annotations

import pytest

from gem_core.errors import InvalidArgument, SandboxClosed
from gem_core.sandbox import Sandbox
from gem_core.tools import PythonCodeTool

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def tool():
    with PythonCodeTool(timeout_s=2, sandbox_options={"size": 2}) as t:
        yield t


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ("Let me compute.<python>print(1+1)</python> done", "print(1+1)"),
        ("```python\nprint(2)\n```", "print(2)"),
        ("```py\nprint(3)\n```", "print(3)"),
        ("<python>\n    x = 1\n    print(x)\n</python>", "x = 1\nprint(x)"),
        # the earliest *complete* block wins, whatever its kind
        ("```python\nfirst()\n``` then <python>second()</python>", "first()"),
        ("<python>first()</python> ```python\nsecond()\n```", "first()"),
        ("<python>unclosed ```python\ninner()\n``` </python>", "inner()"),
    ],
)
def test_parse(action, code):
    call = PythonCodeTool().parse(action)
    assert call is not None and call.tool == "python"
    assert call.payload == code
    assert action[call.span[0]:call.span[1]] == call.raw


@pytest.mark.parametrize("action", ["no code here", "<python>never closed", "```python\nno end", "", None])
def test_parse_none(action):
    assert PythonCodeTool().parse(action) is None


def test_observation_format_matches_reference(tool):
    assert tool.run("<python>print(1+1)</python>").observation == "Code execution result: 2\n\n"
    result = tool.run("<python>print('out')\nraise ValueError('bad')</python>")
    assert result.error and result.info["exit_code"] == 1
    assert result.observation.startswith("Code execution result: out\n\nTraceback (most recent call last):")
    assert result.observation.endswith("ValueError: bad\n\n")
    silent = tool.run("<python>x = 1</python>")
    assert silent.observation == "Code execution result: \n" and not silent.error


def test_keep_error_last_line():
    with PythonCodeTool(keep_error_last_line=True, sandbox_options={"size": 1}) as t:
        result = t.run("<python>1/0</python>")
    assert result.observation == "Code execution result: ZeroDivisionError: division by zero\n"


def test_timeout_message(tool):
    result = tool.run("<python>import time; time.sleep(60)</python>")
    assert result.error and result.info["timed_out"]
    assert "TimeoutError: execution exceeded the 2 s time limit" in result.observation


def test_persistent_session_and_reset():
    with PythonCodeTool(persistent=True, sandbox_options={"size": 1}) as t:
        assert not t.run("<python>import math\nx = 10\nprint('set')</python>").error
        t.run("<python>y = undefined_name</python>")  # failed cells are not kept
        result = t.run("<python>print(math.sqrt(x * x))</python>")
        assert result.observation == "Code execution result: 10.0\n\n"  # replayed output is hidden
        t.reset()
        assert "NameError" in t.run("<python>print(x)</python>").observation


def test_shared_sandbox_is_not_closed_by_the_tool():
    with Sandbox(size=1) as sb:
        t = PythonCodeTool(sandbox=sb)
        assert t.sandbox is sb
        assert t.run("<python>print(5)</python>").observation == "Code execution result: 5\n\n"
        t.close()
        t.close()
        assert not sb.closed
        with pytest.raises(SandboxClosed):
            t.run("<python>print(5)</python>")


def test_arguments_and_instruction():
    with pytest.raises(InvalidArgument, match="must be positive, got 0"):
        PythonCodeTool(timeout_s=0)
    with pytest.raises(InvalidArgument, match="both sandbox= and sandbox_options="):
        PythonCodeTool(sandbox=object(), sandbox_options={"size": 1})
    text = PythonCodeTool().instruction()
    assert "<python>" in text and "```python" in text and "Code execution result" in text
    assert "persist" in PythonCodeTool(persistent=True).instruction()


def _run_in(tool, conn):
    try:
        result = tool.run("<python>import os\nprint(6 * 7)</python>")
        conn.send((result.observation, result.error, tool.sandbox is not None))
        tool.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        conn.send((repr(exc), True, False))


def test_a_tool_used_once_then_shared_across_a_fork_runs_in_each_process():
    """The reference's pattern: one tool used, then shared by forked async vector workers."""
    import multiprocessing

    tool = PythonCodeTool()
    try:
        first = tool.run("<python>print(1 + 1)</python>")
        assert not first.error and "2" in first.observation
        parent_sandbox = tool.sandbox
        ctx = multiprocessing.get_context("fork")
        results = []
        for _ in range(2):
            ours, theirs = ctx.Pipe()
            child = ctx.Process(target=_run_in, args=(tool, theirs))
            child.start()
            assert ours.poll(120), "the forked child did not answer"
            results.append(ours.recv())
            child.join(60)
        for observation, error, _ in results:
            assert not error and "42" in observation, observation
        again = tool.run("<python>print(3 * 3)</python>")  # the parent's sandbox is untouched
        assert not again.error and "9" in again.observation and tool.sandbox is parent_sandbox
    finally:
        tool.close()
