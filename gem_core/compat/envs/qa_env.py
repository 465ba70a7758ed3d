"""Reference ``gem.envs.qa_env``: `QaEnv`, the reference's single-turn QA env, graded by gem_core.

The reference's shape for code that subclasses it (ROLL's env managers): its constructor,
``dataset`` (with the prompt applied by `apply_prompt`), ``idx`` / ``epoch`` /
``first_obs`` / ``answer``, ``extractor`` (the last ``<answer>`` tag, or the last
``\\boxed{}`` with ``extract_boxed=True``), the static ``check_correct`` (exact match after
gem_core's normalisation, `gem_core.grading.qa.exact_match`) and ``step`` returning
``(TERMINAL_STATE, reward, True, True, {"correct": ...})``. For the registered ids use
``gem.make("qa:...")`` (gem_core's `gem_core.envs.qa.QaEnv`).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from gem_core.compat.envs._rows import RowTaskEnv, references
from gem_core.compat.utils.constants import TERMINAL_STATE
from gem_core.compat.utils.parsing import extract_last_boxed_answer, extract_last_tagged_answer

__all__ = ["QaEnv", "apply_prompt", "logger"]

logger = logging.getLogger(__name__)

PROMPT_TEMPLATE = (
    "For any question, always reason through your thought process using:\n"
    "<think> your reasoning here </think>\n"
    "Then, provide your final answer using:\n"
    "<answer> your answer here </answer>\n\n"
    "Question: {question}\n"
)
"""The reference's QA prompt, wrapped around each question by `apply_prompt`."""


def apply_prompt(example: dict[str, Any], question_key: str = "question") -> dict[str, Any]:
    """Put `PROMPT_TEMPLATE` around ``example[question_key]`` (in place; returns the row)."""
    example[question_key] = PROMPT_TEMPLATE.format(question=example[question_key])
    return example


class QaEnv(RowTaskEnv):
    """Single-turn QA on the rows of a dataset (see the module docs)."""

    def __init__(
        self,
        dataset_name: str | None = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "question",
        answer_key: str = "answer",
        seed: int = 0,
        extract_boxed: bool = False,
        load_from_cache_file: bool = True,
        **_: Any,
    ):
        super().__init__()
        self.question_key = question_key
        self.answer_key = answer_key
        self._init_rows("QaEnv", dataset_name, split, dataset, seed, shuffle=False)
        self.dataset = self.dataset.map(
            partial(apply_prompt, question_key=question_key), load_from_cache_file=load_from_cache_file
        ).shuffle(seed=seed)
        self.extractor = extract_last_boxed_answer if extract_boxed else extract_last_tagged_answer

    def step(self, action: Any):
        model_answer = self.extractor(action)
        correct = model_answer is not None and self.check_correct(model_answer, self.answer)
        return TERMINAL_STATE, 1.0 if correct else 0.0, True, True, {"correct": bool(correct)}

    @staticmethod
    def check_correct(model_answer: str, gt_answer: Any) -> bool:
        """Exact match of ``model_answer`` against ``gt_answer`` (a string, number or list).

        Raises:
            ValueError: ``gt_answer`` of another type (as the reference).
        """
        from gem_core.grading.qa import exact_match

        refs = references(gt_answer)
        return exact_match(model_answer, refs)

    def sample_random_action(self) -> str:
        return "<answer>Hello World!</answer>"
