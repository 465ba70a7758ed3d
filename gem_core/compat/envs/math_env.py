"""Reference ``gem.envs.math_env``: `MathEnv`, the reference's single-turn math env, graded by gem_core.

The class keeps the reference's shape for code that subclasses it (ROLL's env managers):
the constructor's arguments, ``dataset`` / ``idx`` / ``epoch`` / ``first_obs`` /
``answer``, ``reset(seed, idx=None)``, the static ``check_correct(model_answer,
gt_answer)`` and ``step`` returning ``(TERMINAL_STATE, reward, True, True, {"correct":
...})``. Grading is gem_core's (`gem_core.grading.math`: math-verify in worker processes
with a timeout), so ``use_mp`` has no effect. Rows: a ``datasets.Dataset`` given as
``dataset=``, else ``dataset_name`` through gem_core's loader (`gem_core.compat.envs._rows`).
For the registered ids use ``gem.make("math:...")`` (gem_core's `gem_core.envs.math.MathEnv`).
"""

from __future__ import annotations

import logging
from typing import Any

from gem_core.compat._not_ported import placeholders
from gem_core.compat.envs._rows import RowTaskEnv, references
from gem_core.compat.utils.constants import TERMINAL_STATE

__all__ = ["MathEnv", "FORMAT_ERROR_REWARD", "verify_fn", "logger"]

logger = logging.getLogger(__name__)

FORMAT_ERROR_REWARD = -0.1
"""The reward of an answer without a final answer, with ``use_format_error_reward=True``."""

GRADE_TIMEOUT_S = 1.0
"""Seconds one grading may take (the reference's limit); past it the answer is wrong."""

(verify_fn,) = placeholders(
    __name__,
    ("verify_fn",),
    instead="gem_core.compat.envs.math_env.MathEnv.check_correct(model_answer, gt_answer) or gem_core.grading.math.get_grader().grade(answer, reference)",
    why="the reference's partial of math-verify's math_metric; gem_core runs math-verify in worker processes",
)


def _final_answer(text: Any) -> str | None:
    from gem_core.grading.extract import extract_boxed

    return extract_boxed(text) if isinstance(text, str) else None


class MathEnv(RowTaskEnv):
    """Single-turn math on the rows of a dataset (see the module docs)."""

    def __init__(
        self,
        dataset_name: str | None = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "problem",
        answer_key: str = "answer",
        use_format_error_reward: bool = False,
        seed: int = 0,
        use_mp: bool = True,
        **kwargs: Any,
    ):
        super().__init__()
        self.question_key = question_key
        self.answer_key = answer_key
        self.use_format_error_reward = bool(use_format_error_reward)
        self.use_mp = use_mp
        self._init_rows("MathEnv", dataset_name, split, dataset, seed, shuffle=not kwargs.get("eval", False))

    def step(self, action: Any):
        if self.use_format_error_reward and _final_answer(action) is None:
            return TERMINAL_STATE, FORMAT_ERROR_REWARD, True, True, {}
        correct = self.check_correct(action, self.answer)
        return TERMINAL_STATE, 1.0 if correct else 0, True, True, {"correct": correct}

    @staticmethod
    def check_correct(model_answer: str, gt_answer: Any) -> bool:
        """Whether ``model_answer`` (a response or its final answer) equals a reference.

        The last ``\\boxed{}`` of a response is its answer; text without one is graded as
        it is. ``gt_answer``: a string, a number or a list of acceptable answers.

        Raises:
            ValueError: ``gt_answer`` of another type (as the reference).
        """
        from gem_core.grading.math import get_grader

        refs = references(gt_answer)
        if not isinstance(model_answer, str):
            return False
        answer = _final_answer(model_answer) or model_answer
        grader = get_grader()
        return any(grader.grade(answer, ref, timeout=GRADE_TIMEOUT_S) for ref in refs)

    def sample_random_action(self) -> str:
        return "\\boxed{42}"

    def spawn(self, same_state: bool = False, **kwargs: Any) -> MathEnv:
        child = MathEnv(
            dataset=self.dataset,
            question_key=self.question_key,
            answer_key=self.answer_key,
            use_format_error_reward=self.use_format_error_reward,
            **{"seed": self.seed, **kwargs},
        )
        if same_state:
            child.set_state(self.get_state())
        return child
