"""Programming envs (`code:CodeContest`, `code:Taco8k`, `code:PrimeIntellect15k`, `eval:CodeContest`):
write a Python program, graded by sandboxed test cases."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from gem_core.envs.dataset import DatasetTaskEnv
from gem_core.errors import InvalidArgument
from gem_core.grading.code import (
    MAX_CODE_CHARS,
    TestCase,
    extract_code,
    grade_program,
    parse_tests,
    select_tests,
)

if TYPE_CHECKING:
    from gem_core.sandbox import Sandbox

__all__ = ["CodeEnv", "REWARD_MODES", "STDIO_INSTRUCTIONS", "CALL_INSTRUCTIONS"]

REWARD_MODES = ("all", "fraction")

STDIO_INSTRUCTIONS = (
    "Write a complete Python 3 program that reads the input from standard input and prints "
    "the answer to standard output. Put the program in a ```python code block; the last code "
    "block of your reply is graded."
)
CALL_INSTRUCTIONS = (
    "Write Python 3 code that defines the function `{fn_name}` (a top-level function, or a "
    "method of a class `Solution`); it is called with the test arguments and its return value "
    "is checked. Put the code in a ```python code block; the last code block of your reply is "
    "graded."
)


class CodeEnv(DatasetTaskEnv):
    """Solve one programming problem from a dataset; the program is run on its test cases.

    Observation: the problem statement followed by `STDIO_INSTRUCTIONS` (or
        `CALL_INSTRUCTIONS` when the tests call a function); after the step, a one-line
        grading report (tests passed, the first failure and why).
    Action: text whose last fenced code block tagged ``python`` (or untagged) holds the
        program (`gem_core.grading.code.extract_code`).
    Rewards: with ``reward="all"`` (default, the reference GEM's) 1.0 when every test
        passes, else 0.0; with ``reward="fraction"`` the fraction of tests passed (all
        tests then run). No code block, an empty one, or one over `MAX_CODE_CHARS`
        characters is a format error: ``format_penalty`` (default -0.1, as in the
        reference) and no test runs.
    Tests: stdin/stdout cases (output compared line by line after whitespace
        normalisation) and function-call cases (return value compared), in the shapes
        `gem_core.grading.code.parse_tests` accepts. At most ``max_tests`` per problem
        (those with the longest inputs, as in the reference), run in parallel in the
        sandbox, each with a ``timeout_s`` wall-clock limit and bounded output. In "all"
        mode the tests not yet started when one fails are skipped.
    Episode end: terminated after the one step. ``info``: ``success`` (all tests passed),
        ``tests_passed``, ``tests_total``, ``tests_run``, ``first_failure`` (``None`` or
        ``"wrong_answer"``/``"runtime_error"``/``"timeout"``/``"output_limit"``/
        ``"sandbox_error"``), ``first_failure_index``, ``failure_detail``,
        ``test_outcomes`` (one kind per test, ``"skipped"`` for tests not run),
        ``grading_s``, ``format_error``, ``parsed_action`` (the program), ``index``.
    Arguments:
        dataset_name, split: the dataset (hub name as in the reference GEM) and split.
        question_key, test_key: its columns (the tests may be stored as a JSON string).
        reward: ``"all"`` or ``"fraction"``.
        max_tests: tests run per problem (``None``: all).
        timeout_s: wall-clock limit of each test, in seconds.
        format_penalty: reward of a reply without a usable code block.
        add_instructions: append the answer-format instructions to the problem.
        sandbox: the `gem_core.sandbox.Sandbox` to run tests in (not closed by the env);
            default: the per-process pool `gem_core.grading.code.shared_sandbox`.
        data_path, env_id: see `gem_core.envs.dataset.DatasetTaskEnv`, which also sets the
            row order (seeds, epochs, ``options={"index": i}``).
    Version history: v0 — the reference GEM's ids, datasets and keys; function-call
        tests, fraction reward and failure kinds added.
    """

    metadata: ClassVar[dict[str, Any]] = {"category": "code"}

    def __init__(
        self,
        dataset_name: str = "axon-rl/CodeContest",
        split: str = "train",
        *,
        question_key: str = "problem",
        test_key: str = "tests",
        reward: str = "all",
        max_tests: int | None = 12,
        timeout_s: float = 10.0,
        format_penalty: float = -0.1,
        add_instructions: bool = True,
        sandbox: Sandbox | None = None,
        data_path: str | None = None,
        env_id: str | None = None,
    ):
        if reward not in REWARD_MODES:
            raise InvalidArgument(
                f"CodeEnv(reward=...) expects one of {REWARD_MODES} ('all': 1.0 only when every "
                f"test passes, 'fraction': the share of tests passed), got {reward!r}"
            )
        if max_tests is not None and (isinstance(max_tests, bool) or not isinstance(max_tests, int) or max_tests < 1):
            raise InvalidArgument(f"CodeEnv(max_tests=...) expects a positive int or None, got {max_tests!r}")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise InvalidArgument(f"CodeEnv(timeout_s=...) expects a positive number of seconds, got {timeout_s!r}")
        super().__init__(
            env_id=env_id,
            dataset_name=dataset_name,
            split=split,
            data_path=data_path,
            required_keys=(question_key, test_key),
        )
        self.question_key = question_key
        self.test_key = test_key
        self.reward_mode = reward
        self.max_tests = max_tests
        self.timeout_s = float(timeout_s)
        self.format_penalty = float(format_penalty)
        self.add_instructions = bool(add_instructions)
        self.sandbox = sandbox
        self.tests: list[TestCase] = []

    def prompt(self, row: dict[str, Any]) -> str:
        try:
            cases = parse_tests(row[self.test_key])
        except ValueError as e:
            raise InvalidArgument(f"{self.env_id}: row {self.index} of {self.dataset_name!r}: {e}") from None
        if not cases:
            raise InvalidArgument(
                f"{self.env_id}: row {self.index} of {self.dataset_name!r} has no test cases; "
                "every problem needs at least one to be graded"
            )
        self.tests = select_tests(cases, self.max_tests)
        problem = str(row[self.question_key]).strip()
        if not self.add_instructions:
            return problem
        fn_name = next((c.fn_name for c in self.tests if c.fn_name), None)
        note = CALL_INSTRUCTIONS.format(fn_name=fn_name) if fn_name else STDIO_INSTRUCTIONS
        return f"{problem}\n\n{note}"

    def grade(self, action: Any) -> tuple[str, float, dict[str, Any]]:
        code = extract_code(action) if isinstance(action, str) else None
        if not code or len(code) > MAX_CODE_CHARS:
            if code is None:
                what = "a non-text reply" if not isinstance(action, str) else "no ```python code block"
            elif not code:
                what = "an empty code block"
            else:
                what = f"a program of {len(code)} characters (at most {MAX_CODE_CHARS})"
            info = {"success": False, "format_error": True, "invalid_action": True,
                    "tests_passed": 0, "tests_total": len(self.tests), "tests_run": 0,
                    "first_failure": None}
            obs = f"Format error: {what}. Put the whole program in one ```python code block."
            return obs, self.format_penalty, info
        result = grade_program(
            code,
            self.tests,
            sandbox=self.sandbox,
            timeout_s=self.timeout_s,
            stop_on_failure=self.reward_mode == "all",
        )
        success = result.all_passed
        reward = float(success) if self.reward_mode == "all" else result.fraction
        info = {"success": success, "format_error": False, "parsed_action": code,
                **result.summary()}
        if success:
            obs = f"All {result.total} tests passed."
        else:
            i = result.first_failure_index
            detail = result.outcomes[i].detail if i is not None else ""
            obs = (f"Passed {result.passed} of {result.total} tests. Test {i + 1} failed: "
                   f"{result.first_failure}" + (f" ({detail})." if detail else "."))
        return obs, reward, info

    def sample_random_action(self) -> str:
        fn_name = next((c.fn_name for c in self.tests if c.fn_name), None)
        if fn_name:
            body = self.rng.choice(["return args[0] if args else None", "return 0", "return list(args)"])
            return f"```python\ndef {fn_name}(*args):\n    {body}\n```"
        body = self.rng.choice([
            "import sys\nprint(sys.stdin.read().strip())",
            "print(0)",
            "import sys\nprint(len(sys.stdin.read().split()))",
        ])
        return f"```python\n{body}\n```"
