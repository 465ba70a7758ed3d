"""Reference ``gem.envs.code_env``: `CodeEnv`, the reference's single-turn coding env, graded in gem_core's sandbox.

The reference's shape for code that subclasses it (ROLL's env managers): its constructor,
``dataset`` / ``epoch`` / ``first_obs`` / ``tests`` (the row's tests; JSON text is
decoded), ``_check_correct(model_code)`` and ``step`` returning ``(TERMINAL_STATE,
reward, True, True, {})`` (-0.1 without a code block). The program runs on every selected
test (the ``max_tests`` with the longest inputs) in gem_core's sandbox
(`gem_core.grading.code.grade_program`: isolated, resource-limited; ``sandbox_type`` and
``max_workers`` have no effect); any failure makes it wrong. For the registered ids use
``gem.make("code:...")`` (gem_core's `gem_core.envs.code.CodeEnv`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from gem_core.compat.envs._rows import RowTaskEnv
from gem_core.compat.utils.constants import TERMINAL_STATE
from gem_core.compat.utils.parsing import extract_code_from_model

__all__ = ["CodeEnv", "logger"]

logger = logging.getLogger(__name__)

TEST_TIMEOUT_S = 10.0
"""Wall-clock seconds per test (the reference's default)."""


class CodeEnv(RowTaskEnv):
    """Single-turn coding on the rows of a dataset (see the module docs)."""

    answer_key = None

    def __init__(
        self,
        dataset_name: str | None = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "problem",
        test_key: str = "tests",
        seed: int = 0,
        max_workers: int = 5,
        max_tests: int = 12,
        verbose: bool = False,
        sandbox_type: str = "none",
        **_: Any,
    ):
        super().__init__()
        self.question_key = question_key
        self.test_key = test_key
        self._init_rows("CodeEnv", dataset_name, split, dataset, seed, shuffle=True)
        self.max_workers = max_workers
        self.max_tests = max_tests
        self.verbose = verbose
        self.sandbox_type = sandbox_type
        self.tests: Any = None

    def _serve(self, row: dict[str, Any]) -> None:
        self.first_obs = row[self.question_key]
        tests = row[self.test_key]
        self.tests = json.loads(tests) if isinstance(tests, str) else tests

    def step(self, action: Any):
        code = extract_code_from_model(action)
        if code is None:
            return TERMINAL_STATE, -0.1, True, True, {}
        return TERMINAL_STATE, 1.0 if self._check_correct(code) else 0.0, True, True, {}

    def _check_correct(self, model_code: str) -> bool:
        """Whether ``model_code`` passes every selected test of the current row."""
        from gem_core.grading.code import grade_program, parse_tests, select_tests

        cases = select_tests(parse_tests(self.tests), self.max_tests)
        if not cases:
            return False
        result = grade_program(model_code, cases, timeout_s=TEST_TIMEOUT_S)
        if self.verbose:
            logger.info("CodeEnv: %s", result.summary())
        return result.all_passed

    def get_state(self) -> dict[str, Any]:
        return {"first_obs": self.first_obs, "tests": self.tests}

    def set_state(self, state: dict[str, Any]) -> None:
        self.first_obs = state["first_obs"]
        self.tests = state["tests"]
