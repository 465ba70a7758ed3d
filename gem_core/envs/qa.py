"""Question-answering envs (`qa:*`, `logic:RuleTaker-*`, `eval:QaOpen`, search-QA eval ids) and
`DatasetTaskEnv`, the shared base of single-turn envs over dataset rows."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from gem_core.core import Env
from gem_core.data import load_rows
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.grading.qa import (
    MAX_ANSWER_CHARS,
    as_references,
    exact_match,
    extract_tagged_answer,
    f1_score,
)

__all__ = ["DatasetTaskEnv", "QaEnv", "QA_PROMPT", "BOXED_PROMPT", "REWARD_MODES"]

QA_PROMPT = (
    "Answer the question. Think it through first if you like, then give your final answer, "
    "as short as possible (a name, a number, a few words), between <answer> and </answer>.\n\n"
    "Question: {question}"
)
"""The default prompt: ``{question}`` is replaced by the row's question."""

BOXED_PROMPT = (
    "Answer the question. Think it through first if you like, then give your final answer "
    "inside \\boxed{}, for example \\boxed{True}.\n\n{question}"
)
"""The default prompt when the answer is extracted from ``\\boxed{}`` (RuleTaker)."""

REWARD_MODES = ("em", "f1")


class DatasetTaskEnv(Env[str, str]):
    """Base of single-turn envs whose episodes are the rows of a dataset.

    Item choice: the rows are visited in a pseudo-random order that covers every row
    once per epoch (an affine permutation ``(a * k + b) mod n`` drawn from ``self.rng``,
    O(1) per reset for any dataset size). ``reset(seed=s)`` restarts the order from the
    seed, so the same seed gives the same row; unseeded resets continue it, so an
    evaluation loop of ``n`` unseeded resets after one seeded reset sees every row once.
    ``reset(options={"index": i})`` serves row ``i`` directly.

    One `step` grades the action and ends the episode (``terminated=True``); a second
    `step` raises `ResetNeeded`. A subclass implements `prompt`, `grade` and
    `sample_random_action`.

    Args:
        env_id: the id named in error messages (set by the registration).
        dataset_name: the dataset's hub name (as in the reference GEM).
        split: the split to read.
        data_path: a local copy, or ``"sample"`` for the shipped sample
            (see `gem_core.data.load_rows`).
        required_keys: columns every row must have.
    """

    def __init__(
        self,
        *,
        env_id: str | None,
        dataset_name: str,
        split: str,
        data_path: str | None,
        required_keys: tuple[str, ...],
    ):
        self.env_id = env_id or f"{type(self).__name__}({dataset_name!r})"
        self.dataset_name = dataset_name
        self.split = split
        self.rows = load_rows(self.env_id, dataset_name, split, data_path, required_keys=required_keys)
        self.row: dict[str, Any] | None = None
        self.index = -1
        self.done = True
        self._a = 0  # the permutation of the current epoch: index = (a * k + b) mod n
        self._b = 0
        self._k = -1  # -1: no epoch drawn yet

    # --- item choice ----------------------------------------------------------------
    def _new_epoch(self) -> None:
        n = len(self.rows)
        a = 1
        if n > 2:
            a = self.rng.randrange(1, n)
            while math.gcd(a, n) != 1:
                a = self.rng.randrange(1, n)
        self._a, self._b, self._k = a, self.rng.randrange(n), 0

    def _next_index(self, options: dict[str, Any] | None) -> int:
        n = len(self.rows)
        if options and options.get("index") is not None:
            index = options["index"]
            if isinstance(index, bool) or not isinstance(index, int) or not -n <= index < n:
                raise InvalidArgument(
                    f"{self.env_id}: reset(options={{'index': ...}}) expects an int in "
                    f"[0, {n}) (the dataset has {n} rows), got {index!r}"
                )
            return index % n
        if self._k < 0 or self._k >= n:
            self._new_epoch()
        index = (self._a * self._k + self._b) % n
        self._k += 1
        return index

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._k = -1  # restart the order from the new seed
        self.index = self._next_index(options)
        self.row = self.rows[self.index]
        self.done = False
        return self.prompt(self.row), {"index": self.index}

    def step(self, action: str):
        if self.done or self.row is None:
            raise ResetNeeded(
                f"{self.env_id}: step() called "
                + ("before reset()" if self.row is None else "after the episode ended")
                + "; each episode is one question: call reset() first"
            )
        self.done = True
        obs, reward, info = self.grade(action)
        info.setdefault("turn", 1)
        return obs, float(reward), True, False, info

    # --- hooks --------------------------------------------------------------------------
    def prompt(self, row: dict[str, Any]) -> str:
        """The observation of an episode over ``row``."""
        raise NotImplementedError

    def grade(self, action: Any) -> tuple[str, float, dict[str, Any]]:
        """Grade the action: ``(observation, reward, info)``; ``info`` holds ``success``."""
        raise NotImplementedError

    def close(self) -> None:
        self.done = True


def _describe(action: Any) -> str:
    if isinstance(action, str):
        return "an empty reply" if not action.strip() else f"{len(action)} characters"
    return f"a {type(action).__name__}, not a str"


class QaEnv(DatasetTaskEnv):
    r"""Answer one question from a QA dataset; graded by exact match or token F1.

    Observation: the question inside `QA_PROMPT` (or `BOXED_PROMPT` with
        ``extract_boxed=True``); after the step, a one-line grading report.
    Action: text whose last ``<answer>...</answer>`` (default) or last ``\boxed{...}``
        (``extract_boxed=True``, RuleTaker) holds the answer. Only one answer counts.
    Rewards: with ``reward="em"`` (default, the reference GEM's) 1.0 when the answer
        matches a reference after SQuAD normalisation (case, punctuation, articles,
        whitespace), else 0.0; with ``reward="f1"`` the token F1 against the best
        reference. No answer found, or an answer over `MAX_ANSWER_CHARS` characters, is
        a format error: ``format_penalty`` (default 0.0, as in the reference).
    Episode end: terminated after the one step. ``info``: ``success`` (exact match, in
        both reward modes), ``em``, ``f1``, ``parsed_action`` (the extracted answer),
        ``format_error``, ``turn``, ``index`` (the row).
    Multi-turn use: wrap in `gem_core.tools.ToolEnvWrapper` with a
        `gem_core.tools.SearchTool`; ``<search>`` turns are answered by the tool and the
        turn holding the answer is graded.
    Arguments:
        dataset_name, split: the dataset (hub name as in the reference GEM) and split.
        question_key, answer_key: its columns. Answers may be a string, a number or a
            list of acceptable strings.
        extract_boxed: read the answer from the last ``\boxed{}`` instead of ``<answer>``.
        reward: ``"em"`` or ``"f1"``.
        format_penalty: reward of a reply without an answer.
        prompt_template: the prompt, with a ``{question}`` placeholder (default: see above).
        data_path, env_id: see `DatasetTaskEnv`.
    Version history: v0 — the reference GEM's ids, datasets and keys; F1 reward added.
    """

    metadata: ClassVar[dict[str, Any]] = {"category": "qa"}

    def __init__(
        self,
        dataset_name: str = "axon-rl/NaturalQuestions",
        split: str = "train",
        *,
        question_key: str = "problem",
        answer_key: str = "answer",
        extract_boxed: bool = False,
        reward: str = "em",
        format_penalty: float = 0.0,
        prompt_template: str | None = None,
        data_path: str | None = None,
        env_id: str | None = None,
    ):
        if reward not in REWARD_MODES:
            raise InvalidArgument(
                f"QaEnv(reward=...) expects one of {REWARD_MODES} ('em': exact match, 'f1': "
                f"token F1), got {reward!r}"
            )
        template = prompt_template or (BOXED_PROMPT if extract_boxed else QA_PROMPT)
        if "{question}" not in template:
            raise InvalidArgument(
                f"QaEnv(prompt_template=...) must contain the placeholder '{{question}}', got "
                f"{template[:60]!r}"
            )
        super().__init__(
            env_id=env_id,
            dataset_name=dataset_name,
            split=split,
            data_path=data_path,
            required_keys=(question_key, answer_key),
        )
        self.question_key = question_key
        self.answer_key = answer_key
        self.extract_boxed = bool(extract_boxed)
        self.reward_mode = reward
        self.format_penalty = float(format_penalty)
        self.prompt_template = template

    @property
    def references(self) -> list[str]:
        """The acceptable answers of the current question."""
        return as_references(self.row[self.answer_key]) if self.row is not None else []

    def prompt(self, row: dict[str, Any]) -> str:
        return self.prompt_template.replace("{question}", str(row[self.question_key]).strip())

    def extract(self, text: str) -> str | None:
        """The answer in ``text`` (see the action format), or ``None``."""
        if self.extract_boxed:
            from gem_core.envs.games.base import extract_last_boxed

            found = extract_last_boxed(text)
            return None if found is None else found.strip()
        return extract_tagged_answer(text)

    def grade(self, action: Any) -> tuple[str, float, dict[str, Any]]:
        answer = self.extract(action) if isinstance(action, str) else None
        where = r"\boxed{...}" if self.extract_boxed else "<answer>...</answer>"
        if answer is None or len(answer) > MAX_ANSWER_CHARS:
            why = (
                f"no {where} found in {_describe(action)}" if answer is None
                else f"the answer has {len(answer)} characters (at most {MAX_ANSWER_CHARS})"
            )
            info = {"success": False, "format_error": True, "invalid_action": True,
                    "em": False, "f1": 0.0, "index": self.index}
            return f"Format error: {why}. Give a short final answer inside {where}.", self.format_penalty, info
        refs = self.references
        em = exact_match(answer, refs)
        f1 = 1.0 if em else f1_score(answer, refs)
        reward = float(em) if self.reward_mode == "em" else f1
        info = {"success": em, "format_error": False, "parsed_action": answer,
                "em": em, "f1": f1, "index": self.index}
        verdict = "Correct." if em else ("Partly correct." if f1 > 0 else "Incorrect.")
        return f"{verdict} Exact match: {int(em)}; F1: {f1:.2f}.", reward, info

    def sample_random_action(self) -> str:
        refs = self.references
        if self.extract_boxed:
            choice = self.rng.choice(["True", "False", "Unknown", *refs[:1]])
            return f"\\boxed{{{choice}}}"
        choice = refs[0] if refs and self.rng.random() < 0.5 else self.rng.choice(["unknown", "yes", "42"])
        return f"<answer>{choice}</answer>"
