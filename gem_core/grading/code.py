"""Program grading: code extraction, test-case parsing and parallel sandboxed test runs.

A submission is graded against test cases of two kinds:

* **stdin/stdout** (`TestCase.fn_name` is ``None``): the program reads ``input`` on its
  standard input; its standard output must match ``output`` line by line after
  whitespace normalisation (`outputs_match`).
* **function call** (`TestCase.fn_name` set): the program is executed as a module, then
  ``fn_name(*args)`` is called (a top-level function, or a method of a ``Solution``
  class, LeetCode style); the return value must equal ``output`` (`values_match`).

Every test runs in `gem_core.sandbox.Sandbox` (by default one pool per process shared
by every grader, `shared_sandbox`); the tests of one submission run in parallel, each
with its own wall-clock timeout and bounded output.

Accepted shapes of a row's ``tests`` field (a JSON string of them too):

* ``{"inputs": [...], "outputs": [...]}`` (CodeContests, TACO/APPS, the reference GEM),
  with an optional ``"fn_name"`` that makes every case a function call; an input or
  output given as a list of lines is joined with newlines (stdin/stdout cases);
* a list of ``{"input": ..., "output": ...}`` dicts, each optionally with ``"fn_name"``
  and ``"testtype"``/``"type"`` (``"stdin"``/``"stdin_stdout"`` or
  ``"functional"``/``"function_call"``). A function-call input that is a string holds
  one JSON value per line (one per argument).
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gem_core.errors import InvalidArgument

if TYPE_CHECKING:
    from gem_core.sandbox import ExecResult, Sandbox

__all__ = [
    "TestCase",
    "TestOutcome",
    "GradeResult",
    "FAILURE_KINDS",
    "MAX_CODE_CHARS",
    "MAX_RESULT_DEPTH",
    "extract_code",
    "parse_tests",
    "select_tests",
    "outputs_match",
    "values_match",
    "grade_program",
    "shared_sandbox",
]

FAILURE_KINDS = ("wrong_answer", "runtime_error", "timeout", "output_limit", "sandbox_error")
"""How a test can fail (`TestOutcome.kind`; ``"passed"`` and ``"skipped"`` otherwise)."""

MAX_CODE_CHARS = 100_000
"""Longest program graded; a longer code block is a format error in the code env."""

_TICKS = "```"
_PYTHON_TAGS = frozenset({"", "python", "python3", "py", "py3"})
_TRUNCATION_MARK = re.compile(r"\n\.\.\. \[\d+ bytes truncated\] \.\.\.\n")


def extract_code(text: str) -> str | None:
    """The program of a reply: the last fenced block tagged ``python`` (or ``py``,
    ``python3``) or untagged.

    A block opens with a line starting with three backticks and an optional tag, and
    closes at the next three backticks. Blocks in other languages (```` ```text ````,
    ```` ```bash ````) are skipped whole. Returns the block's content with surrounding
    blank lines removed, ``""`` for an empty block, or ``None`` when the text has no such
    block. Linear in the text's length.

    >>> extract_code("Try:\\n```python\\nprint(1)\\n```\\nor better\\n```\\nprint(2)\\n```")
    'print(2)'
    """
    last = None
    pos = 0
    newline = -1
    while True:
        start = text.find(_TICKS, pos)
        if start < 0:
            break
        if newline < start:
            newline = text.find("\n", start)
            if newline < 0:
                break  # no line can open a block any more
        info = text[start + 3 : newline]
        if _TICKS in info:
            pos = start + 3  # not an opening line; try the next backticks on it
            continue
        close = text.find(_TICKS, newline + 1)
        if close < 0:
            break
        if _tag(info) in _PYTHON_TAGS:
            last = text[newline + 1 : close]
        pos = close + 3
    if last is None:
        return None
    return last.strip("\n").rstrip()


def _tag(info: str) -> str:
    words = info.split(maxsplit=1)
    return words[0].lower() if words else ""


@dataclass(frozen=True, slots=True)
class TestCase:
    """One test of a program.

    Attributes:
        input: stdin text (stdin/stdout cases) or the argument list (function calls).
        output: the expected stdout text, or the expected return value.
        fn_name: the function to call; ``None`` for a stdin/stdout case.
    """

    __test__ = False  # not a pytest class

    input: Any
    output: Any
    fn_name: str | None = None


def _lines(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(map(str, value))
    return str(value)


def _call_args(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return [json.loads(line) for line in value.splitlines() if line.strip()]
    return [value]


def _case(inp: Any, out: Any, fn_name: Any, where: str) -> TestCase:
    if fn_name:
        if not isinstance(fn_name, str) or not fn_name.isidentifier():
            raise InvalidArgument(f"{where}: fn_name must be a Python identifier, got {fn_name!r}")
        try:
            args = _call_args(inp)
        except json.JSONDecodeError as e:
            raise InvalidArgument(
                f"{where}: a function-call input given as text must hold one JSON value per "
                f"line (one per argument); got {str(inp)[:60]!r} ({e.msg})"
            ) from None
        return TestCase(args, out, fn_name)
    return TestCase(_lines(inp), _lines(out), None)


_FUNCTIONAL = frozenset({"functional", "function_call", "call", "fn"})


def parse_tests(tests: Any) -> list[TestCase]:
    """Turn a dataset's ``tests`` field into `TestCase` objects (shapes: module docstring).

    Raises:
        ValueError: an unknown shape, unequal input/output counts, or a bad ``fn_name``;
            the message says which shapes are accepted.
    """
    if isinstance(tests, (str, bytes)):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError as e:
            raise InvalidArgument(f"tests given as a string must be JSON; parsing failed: {e.msg}") from None
    if isinstance(tests, dict) and "inputs" in tests and "outputs" in tests:
        inputs, outputs = tests["inputs"], tests["outputs"]
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise InvalidArgument(
                "tests['inputs'] and tests['outputs'] must be lists of equal length; got "
                f"{type(inputs).__name__} of {len(inputs) if isinstance(inputs, list) else '?'} and "
                f"{type(outputs).__name__} of {len(outputs) if isinstance(outputs, list) else '?'}"
            )
        fn_name = tests.get("fn_name")
        return [_case(i, o, fn_name, f"test {k}") for k, (i, o) in enumerate(zip(inputs, outputs, strict=True))]
    if isinstance(tests, list) and all(isinstance(t, dict) and "input" in t and "output" in t for t in tests):
        cases = []
        for k, t in enumerate(tests):
            kind = str(t.get("testtype") or t.get("type") or "").lower()
            fn_name = t.get("fn_name") or t.get("func_name")
            if kind in _FUNCTIONAL and not fn_name:
                raise InvalidArgument(f"test {k} is a function-call test ({kind!r}) without an 'fn_name'")
            cases.append(_case(t["input"], t["output"], fn_name if kind not in ("stdin", "stdin_stdout") else None, f"test {k}"))
        return cases
    shape = type(tests).__name__ + (f" with keys {sorted(tests)[:6]}" if isinstance(tests, dict) else "")
    raise InvalidArgument(
        f"unrecognised tests field ({shape}); expected {{'inputs': [...], 'outputs': [...], "
        "'fn_name'?: str}} or a list of {'input': ..., 'output': ..., 'fn_name'?: str} dicts "
        "(or either as a JSON string)"
    )


def select_tests(cases: Sequence[TestCase], max_tests: int | None) -> list[TestCase]:
    """At most ``max_tests`` cases: those with the longest inputs (the reference GEM's rule),
    kept in their original order. ``None`` keeps all."""
    if max_tests is None or len(cases) <= max_tests:
        return list(cases)
    size = [len(c.input) if isinstance(c.input, str) else len(json.dumps(c.input)) for c in cases]
    keep = sorted(sorted(range(len(cases)), key=lambda i: -size[i])[:max_tests])
    return [cases[i] for i in keep]


def _normal_lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def outputs_match(actual: str, expected: str) -> bool:
    """Whether two outputs agree line by line after whitespace normalisation.

    Leading and trailing blank lines are ignored, and within a line runs of spaces and
    tabs count as one space and the ends are stripped (``"1  2 \\n"`` matches ``"1 2"``).
    Line breaks and every other character must agree; numbers are compared as text.
    """
    if actual == expected:
        return True
    return _normal_lines(actual) == _normal_lines(expected)


def values_match(actual: Any, expected: Any) -> bool:
    """Whether a function's (JSON round-tripped) return value equals the expected one.

    Lists and tuples compare element-wise, dicts key by key, floats with a relative and
    absolute tolerance of 1e-6, and a bool only equals a bool. As in the TACO/APPS
    convention, an expected value given as a one-element list also accepts that element
    (``[5]`` accepts a return value of ``5``).
    """
    if _equal(actual, expected):
        return True
    return isinstance(expected, list) and len(expected) == 1 and _equal(actual, expected[0])


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


# The program runs as a module named "solution" (so an `if __name__ == "__main__":` block
# does not start reading stdin); its prints are captured so they cannot fake the result
# line, which follows a random per-run token.
_CALL_HARNESS = """\
import io as _io, json as _json, sys as _sys
def _gem_plain(v):
    if isinstance(v, (list, tuple)):
        return [_gem_plain(x) for x in v]
    if isinstance(v, dict):
        return {{str(k): _gem_plain(x) for k, x in v.items()}}
    if isinstance(v, (set, frozenset)):
        try:
            return sorted(_gem_plain(x) for x in v)
        except TypeError:
            return [_gem_plain(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)
def _gem_main():
    _args = _json.loads(_sys.stdin.read())
    _out = _sys.stdout
    _sys.stdout = _io.StringIO()
    _ns = {{"__name__": "solution", "__builtins__": __builtins__}}
    exec(compile({code!r}, "<solution>", "exec"), _ns)
    _fn = _ns.get({fn!r})
    if _fn is None and isinstance(_ns.get("Solution"), type):
        _fn = getattr(_ns["Solution"](), {fn!r}, None)
    if not callable(_fn):
        raise NameError("the program defines no function {fn} (nor a Solution.{fn} method)")
    _result = _gem_plain(_fn(*_args))
    _sys.stdout = _out
    _out.write("\\n" + {token!r} + _json.dumps(_result) + "\\n")
_gem_main()
"""


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """The result of one test.

    Attributes:
        kind: ``"passed"``, one of `FAILURE_KINDS`, or ``"skipped"`` (not run: an earlier
            failure stopped the grading).
        duration_s: wall-clock seconds of the run (0 when skipped).
        detail: a short explanation of a failure (expected vs. got, the error's last line).
    """

    __test__ = False

    kind: str
    duration_s: float = 0.0
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.kind == "passed"


@dataclass(frozen=True)
class GradeResult:
    """The grading of one submission.

    Attributes:
        outcomes: one `TestOutcome` per test, in test order.
        passed: tests passed.
        total: tests of the submission.
        first_failure: the kind of the first failing test (in test order), or ``None``.
        first_failure_index: its index, or ``None``.
        duration_s: wall-clock seconds of the whole grading.
    """

    outcomes: list[TestOutcome] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def all_passed(self) -> bool:
        return bool(self.outcomes) and all(o.passed for o in self.outcomes)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.outcomes else 0.0

    @property
    def first_failure_index(self) -> int | None:
        return next((i for i, o in enumerate(self.outcomes) if o.kind in FAILURE_KINDS), None)

    @property
    def first_failure(self) -> str | None:
        i = self.first_failure_index
        return None if i is None else self.outcomes[i].kind

    def summary(self) -> dict[str, Any]:
        """The per-test summary the code env puts in ``info``."""
        i = self.first_failure_index
        return {
            "tests_passed": self.passed,
            "tests_total": self.total,
            "tests_run": sum(o.kind != "skipped" for o in self.outcomes),
            "first_failure": self.first_failure,
            "first_failure_index": i,
            "failure_detail": None if i is None else self.outcomes[i].detail,
            "test_outcomes": [o.kind for o in self.outcomes],
            "grading_s": round(self.duration_s, 4),
        }


def _clip(text: str, limit: int = 120) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return _clip(lines[-1]) if lines else ""


MAX_RESULT_DEPTH = 100
"""Deepest nesting of lists/dicts a function's return value may have; a deeper one is a
``runtime_error`` (no test expects it, and comparing or showing it would recurse)."""


def _nesting_depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests lists and dicts, counted without recursion up to ``limit + 1``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        stack.extend((x, depth + 1) for x in item if isinstance(x, (list, dict)))
    return deepest


def _read_result(text: str) -> tuple[Any, str | None]:
    """The JSON value a function-call run reported, or ``(None, why)`` when it cannot be used.

    The text comes from untrusted code (it can write to fd 1 and find the token): a value
    nested deeper than the decoder's recursion limit, or one deeper than
    `MAX_RESULT_DEPTH`, is a graded failure, never an exception.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, MemoryError):  # JSONDecodeError is a ValueError
        return None, "the function's result could not be read (not one JSON value, or nested too deeply)"
    if _nesting_depth(value, MAX_RESULT_DEPTH) > MAX_RESULT_DEPTH:
        return None, f"the function's result is nested deeper than {MAX_RESULT_DEPTH} levels"
    return value, None


def _judge(case: TestCase, res: ExecResult, token: str | None) -> TestOutcome:
    d = res.duration_s
    if res.sandbox_error is not None:
        return TestOutcome("sandbox_error", d, _clip(res.sandbox_error))
    if res.truncated and _TRUNCATION_MARK.search(res.stdout):
        return TestOutcome("output_limit", d, "the program printed more than the output limit")
    if res.timed_out:
        return TestOutcome("timeout", d, f"no result within the time limit ({d:.1f} s)")
    if res.exit_code != 0:
        why = _last_line(res.stderr) or f"exit code {res.exit_code}"
        if res.exit_code < 0:
            why = f"killed by signal {-res.exit_code}" + (f" ({why})" if res.stderr.strip() else "")
        return TestOutcome("runtime_error", d, why)
    if token is None:
        if outputs_match(res.stdout, case.output):
            return TestOutcome("passed", d)
        return TestOutcome("wrong_answer", d, f"expected {_clip(case.output, 50)!r}, got {_clip(res.stdout, 50)!r}")
    at = res.stdout.rfind(token)
    if at < 0:
        return TestOutcome("runtime_error", d, "the function's result was not reported")
    value, why = _read_result(res.stdout[at + len(token):])
    if why is not None:
        return TestOutcome("runtime_error", d, why)
    if values_match(value, case.output):
        return TestOutcome("passed", d)
    return TestOutcome(
        "wrong_answer", d,
        f"{case.fn_name}(...) returned {_clip(json.dumps(value), 50)}, expected {_clip(json.dumps(case.output), 50)}",
    )


_SHARED: Sandbox | None = None
_SHARED_PID = 0
_SHARED_LOCK = threading.Lock()
_INHERITED: list[Any] = []  # pools inherited through fork: kept alive, never closed here
_EXECUTOR: ThreadPoolExecutor | None = None


def shared_sandbox() -> Sandbox:
    """The process-wide grading pool, created on first use.

    Sized for parallel tests: ``min(8, max(2, os.cpu_count()))`` slots, 2 MiB of output
    kept per stream, default limits otherwise (1 GiB memory, 10 CPU seconds). A process
    forked from one holding the pool gets a pool of its own (the parent's is left alone).
    """
    global _SHARED, _SHARED_PID
    with _SHARED_LOCK:
        if _SHARED is not None and _SHARED_PID != os.getpid():
            _INHERITED.append(_SHARED)  # the parent's zygotes: closing them here would kill them
            _SHARED = None
        if _SHARED is None or _SHARED.closed:
            from gem_core.sandbox import Sandbox

            _SHARED = Sandbox(size=min(8, max(2, os.cpu_count() or 2)), max_output_bytes=2 << 20)
            _SHARED_PID = os.getpid()
        return _SHARED


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    with _SHARED_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=64, thread_name_prefix="gem-grader")
        return _EXECUTOR


def grade_program(
    code: str,
    tests: Sequence[TestCase],
    *,
    sandbox: Sandbox | None = None,
    timeout_s: float = 10.0,
    stop_on_failure: bool = True,
) -> GradeResult:
    """Run ``code`` on every test in parallel in the sandbox and judge each run.

    Args:
        code: the Python program.
        tests: the test cases (`parse_tests`).
        sandbox: the pool to run in (default: `shared_sandbox`); as many tests run at once
            as it has slots.
        timeout_s: wall-clock limit of each test.
        stop_on_failure: after the first failure, tests not yet started are skipped
            (outcome ``"skipped"``): enough when only "all passed" matters.

    Returns:
        The `GradeResult`.
    """
    import time

    pool = sandbox if sandbox is not None else shared_sandbox()
    start = time.monotonic()
    stop = threading.Event()
    token = "\x1e" + secrets.token_hex(8) + "\x1e"

    # At most one test per pool slot in flight, so a test waiting for a slot sees an
    # earlier failure before it starts.
    slots = threading.Semaphore(max(1, pool.size))

    def run(case: TestCase) -> TestOutcome:
        with slots:
            if stop.is_set():
                return TestOutcome("skipped")
            if case.fn_name is None:
                res = pool.run(code, stdin=case.input, timeout=timeout_s)
                outcome = _judge(case, res, None)
            else:
                harness = _CALL_HARNESS.format(code=code, fn=case.fn_name, token=token)
                res = pool.run(harness, stdin=json.dumps(case.input), timeout=timeout_s)
                outcome = _judge(case, res, token)
            if stop_on_failure and not outcome.passed:
                stop.set()
            return outcome

    if len(tests) == 1:
        outcomes = [run(tests[0])]
    else:
        futures: list[Future[TestOutcome]] = [_executor().submit(run, case) for case in tests]
        outcomes = [f.result() for f in futures]
    return GradeResult(outcomes, time.monotonic() - start)
