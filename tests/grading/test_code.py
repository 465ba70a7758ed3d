"""Code grading: extraction, test shapes, output/value comparison and sandboxed runs of good and bad programs."""

from __future__ import annotations

import json

import pytest

from gem_core.grading.code import (
    TestCase,
    extract_code,
    grade_program,
    outputs_match,
    parse_tests,
    select_tests,
    shared_sandbox,
    values_match,
)

ADD = "a, b = map(int, input().split())\nprint(a + b)"
ADD_TESTS = parse_tests({"inputs": ["1 2\n", "3 4\n", "10 -3\n"], "outputs": ["3\n", "7", "7\n"]})


# ----------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    "text, expected",
    [
        ("```python\nprint(1)\n```", "print(1)"),
        ("a\n```python\nprint(1)\n```\nb\n```python\nprint(2)\n```\n", "print(2)"),  # the last block
        ("```\nx = 1\n```", "x = 1"),  # untagged
        ("```py\nx = 1\n```", "x = 1"),
        ("```Python3\nx = 1\n```", "x = 1"),
        ("```python\nx = 1\n```\nOutput:\n```text\n1\n```", "x = 1"),  # other languages skipped
        ("```bash\nls\n```", None),
        ("print(1)", None),
        ("```python\nprint(1)", None),  # unclosed
        ("```python\n\n```", ""),  # empty
        ("```python\n\n    if x:\n        pass\n\n```", "    if x:\n        pass"),  # indentation kept
    ],
)
def test_extract_code(text, expected):
    assert extract_code(text) == expected


@pytest.mark.timeout(10)
def test_extract_code_on_a_megabyte_of_fences_is_fast():
    # A regex like ```[^\n]*\n(.*?)``` rescans the rest of the text from every fence: quadratic.
    assert extract_code("```x" * 250_000) is None
    assert extract_code("```python\n" * 100_000 + "```") == ""  # 50 000 empty blocks
    assert extract_code("```python\n" + "x" * 1_000_000 + "\n```") == "x" * 1_000_000
    assert extract_code("```\n" + "```python" * 100_000) == ""  # an empty untagged block


# ----------------------------------------------------------------------------- test shapes


def test_parse_dict_shape_with_line_lists_and_json_string():
    tests = {"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", ["7"]]}
    cases = parse_tests(tests)
    assert cases == [TestCase("1 2\n", "3\n"), TestCase("3\n4", "7")]
    assert parse_tests(json.dumps(tests)) == cases


def test_parse_function_call_shapes():
    cases = parse_tests({"inputs": [[1, 2], [[1, 2], 3]], "outputs": [[3], 6], "fn_name": "f"})
    assert cases == [TestCase([1, 2], [3], "f"), TestCase([[1, 2], 3], 6, "f")]
    listed = parse_tests([
        {"input": "[1, 2]\n3", "output": "6", "testtype": "functional", "fn_name": "g"},
        {"input": "5\n", "output": "5\n", "testtype": "stdin"},
    ])
    assert listed == [TestCase([[1, 2], 3], "6", "g"), TestCase("5\n", "5\n", None)]


@pytest.mark.parametrize(
    "tests, message",
    [
        ({"inputs": ["1"], "outputs": []}, "must be lists of equal length; got list of 1 and list of 0"),
        ({"cases": []}, "unrecognised tests field (dict with keys ['cases']); expected {'inputs'"),
        (42, "unrecognised tests field (int)"),
        ("not json", "tests given as a string must be JSON"),
        ({"inputs": [[1]], "outputs": [1], "fn_name": "not valid"}, "fn_name must be a Python identifier"),
        ([{"input": "x", "output": 1, "testtype": "functional"}], "function-call test ('functional') without an 'fn_name'"),
        ([{"input": "{bad", "output": 1, "fn_name": "f"}], "one JSON value per line"),
    ],
)
def test_parse_errors_name_the_accepted_shapes(tests, message):
    with pytest.raises(ValueError) as err:
        parse_tests(tests)
    assert message in str(err.value)


def test_select_tests_keeps_the_longest_inputs_in_order():
    cases = [TestCase("x" * n, "") for n in (3, 9, 1, 7, 5)]
    assert [len(c.input) for c in select_tests(cases, 3)] == [9, 7, 5]
    assert select_tests(cases, None) == cases and select_tests(cases, 10) == cases


# ----------------------------------------------------------------------------- comparison


@pytest.mark.parametrize(
    "actual, expected, same",
    [
        ("3\n", "3", True),
        ("1  2 \n3\n\n", "1 2\n3", True),
        ("\n\n1\t2\n", "1 2", True),
        ("1 2", "1\n2", False),  # line breaks matter
        ("1\n\n2", "1\n2", False),  # so do blank lines inside
        ("3.0", "3", False),  # numbers are text
        ("YES", "yes", False),
        ("", "", True),
        ("", "0", False),
    ],
)
def test_outputs_match(actual, expected, same):
    assert outputs_match(actual, expected) is same


@pytest.mark.parametrize(
    "actual, expected, same",
    [
        ([1, 2], [1, 2], True),
        (5, [5], True),  # a one-element expected list also accepts its element
        ([1, 2], [[1, 2]], True),
        (1, [1, 2], False),
        (0.1 + 0.2, 0.3, True),
        (1, 1.0000001, True),
        (1.0, 1.1, False),
        (True, 1, False),  # a bool only equals a bool
        (True, True, True),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"b": 1}, False),
        ("x", "x", True),
        (None, None, True),
        (None, [None], True),
    ],
)
def test_values_match(actual, expected, same):
    assert values_match(actual, expected) is same


# ----------------------------------------------------------------------------- sandboxed runs


def test_correct_program_passes_every_test():
    result = grade_program(ADD, ADD_TESTS)
    assert result.all_passed and result.passed == result.total == 3 and result.fraction == 1.0
    assert result.summary()["first_failure"] is None


@pytest.mark.parametrize(
    "code, kind, detail",
    [
        ("print(3)", "wrong_answer", "expected '7', got '3'"),
        ("raise ValueError('boom')", "runtime_error", "ValueError: boom"),
        ("def f(n):\n    return f(n + 1)\nf(0)", "runtime_error", "RecursionError"),
        ("import sys\nsys.exit(3)", "runtime_error", "exit code 3"),
        ("print(1 +", "runtime_error", "SyntaxError"),
        ("while True:\n    pass", "timeout", "no result within the time limit"),
        ("while True:\n    print('x' * 1000)", "output_limit", "more than the output limit"),
        ("print('y' * (3 << 20))", "output_limit", "more than the output limit"),  # finite, but over 2 MiB
    ],
)
def test_failing_programs_report_the_failure_kind(code, kind, detail):
    result = grade_program(code, ADD_TESTS, timeout_s=1.0, stop_on_failure=False)
    assert not result.all_passed
    assert result.first_failure == kind, result.outcomes
    assert detail in result.outcomes[result.first_failure_index].detail
    summary = result.summary()
    assert summary["first_failure"] == kind and summary["tests_total"] == 3
    assert summary["tests_passed"] == (1 if code == "print(3)" else 0)


def test_program_that_reads_no_input_and_exit_zero():
    tests = parse_tests({"inputs": [""], "outputs": ["5050\n"]})
    assert grade_program("print(sum(range(101)))", tests).all_passed
    assert grade_program("import sys\nprint(5050)\nsys.exit(0)", tests).all_passed
    assert grade_program("print(sum(range(100)))", tests).first_failure == "wrong_answer"


def test_stop_on_failure_skips_tests_not_started():
    tests = [TestCase(f"{i} {i}\n", f"{2 * i}\n") for i in range(12)]
    size = shared_sandbox().size
    result = grade_program("raise SystemExit(1)", tests)
    summary = result.summary()
    assert summary["tests_run"] <= size < 12
    assert summary["test_outcomes"].count("skipped") == 12 - summary["tests_run"]
    assert result.fraction == 0.0
    full = grade_program("raise SystemExit(1)", tests, stop_on_failure=False)
    assert full.summary()["tests_run"] == 12


def test_fraction_counts_passed_tests():
    result = grade_program("print(7)", ADD_TESTS, stop_on_failure=False)
    assert (result.passed, result.total) == (2, 3) and result.fraction == pytest.approx(2 / 3)
    assert result.summary()["test_outcomes"] == ["wrong_answer", "passed", "passed"]


FN_TESTS = parse_tests({"inputs": [[1, 2], [[3], [4, 5]]], "outputs": [[3], [3, 4, 5]], "fn_name": "join"})


@pytest.mark.parametrize(
    "code, kind",
    [
        ("def join(a, b):\n    print('noise')\n    return a + b", "passed"),
        ("class Solution:\n    def join(self, a, b):\n        return a + b", "passed"),
        ("def join(a, b):\n    return tuple(a + b) if isinstance(a, list) else a + b", "passed"),  # tuples as lists
        ("if __name__ == '__main__':\n    input()\ndef join(a, b):\n    return a + b", "passed"),
        ("def join(a, b):\n    return b", "wrong_answer"),
        ("def plus(a, b):\n    return a + b", "runtime_error"),
        ("def join(a, b):\n    raise KeyError(a)", "runtime_error"),
        ("def join(a, b):\n    while True: pass", "timeout"),
    ],
)
def test_function_call_tests(code, kind):
    result = grade_program(code, FN_TESTS, timeout_s=1.0, stop_on_failure=False)
    assert (result.first_failure or "passed") == kind, result.outcomes


def test_function_call_result_cannot_be_faked_by_printing():
    # The harness captures the program's prints; only the real return value counts.
    code = "print('\\x1eabc\\x1e[3]')\ndef join(a, b):\n    return None"
    assert grade_program(code, FN_TESTS).first_failure == "wrong_answer"
    missing = grade_program("def join(a, b):\n    return 1", FN_TESTS, stop_on_failure=False)
    assert "join(...) returned 1, expected" in missing.outcomes[1].detail


# A submission that finds the harness's result token on the calling frame and writes a
# result of its own straight to fd 1: whatever follows the token is hostile text.
_FORGE = (
    "import os, sys\n"
    "def join(a, b):\n"
    "    frame = sys._getframe(1)\n"
    "    while frame is not None:\n"
    "        for const in frame.f_code.co_consts:\n"
    "            if isinstance(const, str) and const.count('\\x1e') == 2:\n"
    "                token = const[const.index('\\x1e'):]\n"
    "                os.write(1, ('\\n' + token + {payload}).encode())\n"
    "                os._exit(0)\n"
    "        frame = frame.f_back\n"
    "    return None\n"
)


@pytest.mark.parametrize(
    "payload, detail",
    [
        ("'[' * 100_000", "could not be read"),  # RecursionError in json.loads, before the fix
        ("'[' * 500 + ']' * 500", "nested deeper than"),  # parses, but too deep to compare or show
        ("'{\"a\":' * 5000 + '1' + '}' * 5000", "could not be read"),
    ],
    ids=["unclosed-100k", "closed-500", "dicts-5000"],
)
def test_a_hostile_result_line_is_a_graded_failure_not_an_exception(payload, detail):
    result = grade_program(_FORGE.format(payload=payload), FN_TESTS, timeout_s=5.0, stop_on_failure=False)
    assert result.first_failure == "runtime_error", result.outcomes
    assert detail in result.outcomes[0].detail, result.outcomes[0]


def test_a_deeply_nested_return_value_is_a_graded_failure():
    # The harness itself serialises a value nested 100 000 levels deep (recursion limit raised).
    code = (
        "import sys\nsys.setrecursionlimit(1_000_000)\n"
        "def join(a, b):\n"
        "    v = []\n"
        "    for _ in range(100_000):\n"
        "        v = [v]\n"
        "    return v\n"
    )
    result = grade_program(code, FN_TESTS, timeout_s=5.0, stop_on_failure=False)
    assert result.first_failure == "runtime_error", result.outcomes


def test_a_submission_leaving_a_deep_tree_does_not_fail_the_next_episode(monkeypatch):
    # Regression: the zygote's cleanup died on the tree (RecursionError), so the next,
    # correct submission of another episode scored 0 with a sandbox_error.
    import gem_core
    from gem_core.sandbox import Sandbox

    monkeypatch.setenv("GEM_DATA", "sample")
    leave_tree = (
        "```python\nimport os\nos.makedirs('t', exist_ok=True)\nos.chdir('t')\n"
        "for _ in range(1600):\n    os.mkdir('dd')\n    os.chdir('dd')\nprint(0)\n```"
    )
    with Sandbox(size=1, max_output_bytes=2 << 20) as sb:
        env = gem_core.make("code:CodeContest", sandbox=sb, max_tests=3)
        try:
            for action, reward in ((leave_tree, 0.0), (None, 1.0)):
                env.reset(seed=0, options={"index": 0})
                if action is None:  # the row's reference solution
                    action = "```python\n" + env.unwrapped.row["solution"] + "\n```"
                _, got, _, _, info = env.step(action)
                assert got == reward, info
                assert info["first_failure"] != "sandbox_error", info
        finally:
            env.close()
