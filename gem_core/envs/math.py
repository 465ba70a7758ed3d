r"""Math task envs: a dataset of problems, one ``\boxed{}`` answer per episode, graded by math-verify."""

from __future__ import annotations

import os
from typing import Any

from gem_core.envs.dataset import DatasetTaskEnv
from gem_core.errors import InvalidArgument
from gem_core.grading.extract import extract_boxed
from gem_core.grading.math import MAX_ANSWER_CHARS, GradeResult, MathGrader, get_grader

__all__ = ["MathEnv", "DEFAULT_INSTRUCTION", "REFERENCE_FORMAT_PENALTY"]

DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
"""Appended to each problem (after a blank line) unless ``instruction=None``."""
REFERENCE_FORMAT_PENALTY = -0.1
"""The reference GEM's format-error reward, used when ``use_format_error_reward=True``."""


class MathEnv(DatasetTaskEnv):
    r"""Answer a math problem from a dataset; the last ``\boxed{...}`` of the response is graded.

    Observation: at reset, the problem text followed by ``instruction`` (by default "Please
        reason step by step, and put your final answer within \boxed{}."). After a step, a
        short verdict ("Correct." / "Incorrect."); with attempts left, the verdict says how
        many remain.
    Action: free text; the content of its last complete ``\boxed{...}`` (or ``\fbox{...}``,
        braces may nest; `gem_core.grading.extract.extract_boxed`) is the answer, graded by
        `gem_core.grading.math` (math-verify, in the process-wide grader pool, with a
        timeout).
    Rewards: 1.0 for a correct answer, 0.0 for a wrong one (also when grading timed out:
        ``info["grader_timeout"]``). A response without a box, or a non-string action, is a
        format error: reward ``format_penalty`` (default 0.0), ``info["format_error"]``.
    Episode end: single-turn by default (``max_turns=1``): the first answer ends the
        episode (``terminated=True``), as does a format error. With ``max_turns > 1`` a
        wrong answer or a format error leaves the episode running while attempts remain;
        a correct answer, or the last attempt, terminates it. Tool turns (through
        `gem_core.tools.ToolEnvWrapper`) do not reach the env and use no attempt.
    Info: ``success`` (the answer was correct; on every step), ``turn``, ``index`` (the
        row), ``format_error``, ``invalid_action``, ``parsed_action`` (the extracted
        answer or ``None``), ``correct``, ``grader_timeout`` and ``grader_error`` (grading
        failed: timeout, worker crash, math-verify error or over-long answer; the answer
        counts as wrong).
    Problem order: `gem_core.envs.dataset.DatasetTaskEnv`'s (same seed, same problem;
        unseeded resets walk a shuffled epoch; ``options={"index": i}``).

    Arguments:
        dataset_name: the hub dataset (the reference GEM's name, e.g. ``"axon-rl/GSM-8k"``),
            also naming the local copy (see `gem_core.data.load_rows`).
        split: the split to read.
        question_key, answer_key: the columns of the problem and of its reference answer
            (a string, a number, or a list of acceptable answers).
        data_path: a local copy of the data, or ``"sample"`` for the small shipped sample.
        max_turns: answer attempts per episode (>= 1).
        format_penalty: reward of a response without a box.
        use_format_error_reward: the reference GEM's switch: when True and
            ``format_penalty`` is 0.0, a format error pays -0.1.
        instruction: text appended to each problem (``None``: the bare problem).
        shuffle: shuffle the order of unseeded resets (``False``: file order).
        grade_timeout: seconds the grader may spend on one answer (default: the shared
            grader's, 5 s).
        grader: a `MathGrader` to use instead of the shared one (its owner closes it).
        env_id: the id named in error messages (set by the registry).

    Version history: v0 — the reference GEM's ids, datasets, splits and keys; grading in a
        shared process pool with hard timeouts.
    """

    metadata = {"category": "math"}

    def __init__(
        self,
        dataset_name: str,
        split: str = "train",
        question_key: str = "problem",
        answer_key: str = "answer",
        data_path: str | os.PathLike[str] | None = None,
        *,
        max_turns: int = 1,
        format_penalty: float = 0.0,
        use_format_error_reward: bool = False,
        instruction: str | None = DEFAULT_INSTRUCTION,
        shuffle: bool = True,
        grade_timeout: float | None = None,
        grader: MathGrader | None = None,
        env_id: str | None = None,
    ):
        if grade_timeout is not None and (
            isinstance(grade_timeout, bool) or not isinstance(grade_timeout, (int, float)) or grade_timeout <= 0
        ):
            raise InvalidArgument(
                f"grade_timeout must be a positive number of seconds or None, got {grade_timeout!r}"
            )
        if grader is not None and not isinstance(grader, MathGrader):
            raise InvalidArgument(
                f"grader must be a gem_core.grading.math.MathGrader or None, got {type(grader).__name__}"
            )
        super().__init__(
            env_id=env_id,
            dataset_name=dataset_name,
            split=split,
            data_path=data_path,
            required_keys=(question_key, answer_key),
            max_turns=max_turns,
            shuffle=shuffle,
        )
        self.question_key = question_key
        self.answer_key = answer_key
        self.format_penalty = float(format_penalty)
        if use_format_error_reward and self.format_penalty == 0.0:
            self.format_penalty = REFERENCE_FORMAT_PENALTY
        self.instruction = instruction
        self.grade_timeout = None if grade_timeout is None else float(grade_timeout)
        self._grader = grader
        if grader is None:
            get_grader()  # start the shared workers now, while the policy generates
        self.problem = ""
        self.answer: Any = None

    @property
    def grader(self) -> MathGrader:
        """The grader in use: the one given, else the process-wide `get_grader` instance."""
        return self._grader if self._grader is not None else get_grader()

    # --- the problem ---------------------------------------------------------------------
    def problem_text(self, row: dict[str, Any]) -> str:
        """The observation text of a row: the problem plus the instruction."""
        problem = str(row[self.question_key])
        return f"{problem}\n\n{self.instruction}" if self.instruction else problem

    def prompt(self, row: dict[str, Any]) -> Any:
        self.answer = row[self.answer_key]
        self.problem = self.problem_text(row)
        return self.observation(self.problem, row)

    def observation(self, text: str, row: dict[str, Any] | None = None) -> Any:
        """The observation for ``text`` (a subclass may add images)."""
        return text

    # --- grading ---------------------------------------------------------------------------
    @property
    def references(self) -> list[str]:
        """The acceptable answers of the current problem, as strings."""
        ans = self.answer
        if isinstance(ans, (list, tuple)):
            return [str(a) for a in ans]
        return [str(ans)]

    def grade_answer(self, answer: str) -> GradeResult:
        """Grade an extracted answer against every acceptable reference (first correct wins)."""
        result = GradeResult(False)
        grader = self.grader
        for ref in self.references:
            result = grader.grade_result(answer, ref, self.grade_timeout)
            if result.correct:
                break
        return result

    def grade(self, action: Any) -> tuple[str, float, dict[str, Any]]:
        content = extract_boxed(action)
        if content is None:
            why = (
                f"the action must be text, got {type(action).__name__}"
                if not isinstance(action, str)
                else "no \\boxed{...} answer found"
            )
            info = self._info(False, format_error=True, parsed=None)
            return f"Format error: {why}. Put your final answer within \\boxed{{}}.", self.format_penalty, info
        result = self.grade_answer(content)
        info = self._info(result.correct, format_error=False, parsed=content)
        info["grader_timeout"] = result.timed_out
        info["grader_error"] = result.error is not None
        if result.correct:
            return "Correct.", 1.0, info
        return ("Incorrect (grading timed out)." if result.timed_out else "Incorrect."), 0.0, info

    @staticmethod
    def _info(correct: bool, *, format_error: bool, parsed: str | None) -> dict[str, Any]:
        if parsed is not None and len(parsed) > MAX_ANSWER_CHARS:
            parsed = parsed[:MAX_ANSWER_CHARS]
        return {
            "success": bool(correct),
            "format_error": format_error,
            "invalid_action": format_error,
            "parsed_action": parsed,
            "correct": bool(correct),
            "grader_timeout": False,
            "grader_error": False,
        }

    def sample_random_action(self) -> str:
        """A boxed random small integer (a well-formed, usually wrong, answer)."""
        return f"The answer is \\boxed{{{self.rng.randint(0, 100)}}}."
