"""Question-answering envs: `qa:*`, `logic:RuleTaker-*`, `eval:QaOpen` and the search-QA eval ids."""

from __future__ import annotations

from typing import Any, ClassVar

from gem_core.envs.dataset import DatasetTaskEnv
from gem_core.errors import InvalidArgument
from gem_core.grading import extract as _extract
from gem_core.grading.qa import MAX_ANSWER_CHARS, as_references, exact_match, f1_score

__all__ = ["QaEnv", "QA_PROMPT", "BOXED_PROMPT", "REWARD_MODES"]

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
        **Use EM for RL rewards.** Plain F1 pays hedging: when the truth is "Paris" or
        "Lyon", ``<answer>Paris Lyon</answer>`` earns 2/3 for sure while a guess earns 0.5
        in expectation, so a policy learns to list candidates. If you want partial
        credit, add ``f1_length_penalty=True``: each reference's F1 is scaled by
        ``min(1, reference tokens / answer tokens)`` (`gem_core.grading.qa.f1_score`),
        which bounds it by the precision, so no hedge earns more in expectation than
        naming the likeliest candidate ("Paris Lyon" earns 1/3).
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
        reward: ``"em"`` (recommended for RL) or ``"f1"``.
        f1_length_penalty: with ``reward="f1"``, scale the F1 reward down when the
            answer is longer than the reference (see Rewards). ``info["f1"]`` stays the
            plain metric.
        format_penalty: reward of a reply without an answer.
        prompt_template: the prompt, with a ``{question}`` placeholder (default: see above).
        data_path, env_id: see `gem_core.envs.dataset.DatasetTaskEnv`, which also sets the
            row order (seeds, epochs, ``options={"index": i}``).
    Version history: v0 — the reference GEM's ids, datasets and keys; F1 reward added;
        ``f1_length_penalty`` added (hedging, issue 12).
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
        f1_length_penalty: bool = False,
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
        if f1_length_penalty and reward != "f1":
            raise InvalidArgument(
                f"QaEnv(f1_length_penalty=True) applies to reward='f1' only, got reward={reward!r}; "
                "pass reward='f1' or drop f1_length_penalty (exact match pays no hedges)"
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
        self.f1_length_penalty = bool(f1_length_penalty)
        self.format_penalty = float(format_penalty)
        self.prompt_template = template

    @property
    def answer(self) -> Any:
        """The current question's answer as the dataset gives it (a string, a number or a
        list of acceptable answers; the reference's ``env.answer``), ``None`` before reset."""
        return self.row[self.answer_key] if self.row is not None else None

    @property
    def references(self) -> list[str]:
        """The acceptable answers of the current question."""
        return as_references(self.row[self.answer_key]) if self.row is not None else []

    def prompt(self, row: dict[str, Any]) -> str:
        return self.prompt_template.replace("{question}", str(row[self.question_key]).strip())

    def extract(self, text: str) -> str | None:
        """The answer in ``text`` (see the action format), or ``None``."""
        if self.extract_boxed:
            found = _extract.extract_boxed(text)
            return None if found is None else found.strip()
        return _extract.extract_tagged_answer(text)

    def grade(self, action: Any) -> tuple[str, float, dict[str, Any]]:
        answer = self.extract(action) if isinstance(action, str) else None
        where = r"\boxed{...}" if self.extract_boxed else "<answer>...</answer>"
        if answer is None or len(answer) > MAX_ANSWER_CHARS:
            why = (
                f"no {where} found in {_describe(action)}" if answer is None
                else f"the answer has {len(answer)} characters (at most {MAX_ANSWER_CHARS})"
            )
            info = {"success": False, "format_error": True, "invalid_action": True,
                    "em": False, "f1": 0.0}
            return f"Format error: {why}. Give a short final answer inside {where}.", self.format_penalty, info
        refs = self.references
        em = exact_match(answer, refs)
        f1 = 1.0 if em else f1_score(answer, refs)
        if self.reward_mode == "em":
            reward = float(em)
        elif self.f1_length_penalty and not em:
            reward = f1_score(answer, refs, length_penalty=True)
        else:
            reward = f1
        info = {"success": em, "format_error": False, "parsed_action": answer,
                "em": em, "f1": f1}
        verdict = "Correct." if em else ("Partly correct." if f1 > 0 else "Incorrect.")
        return f"{verdict} Exact match: {int(em)}; F1: {f1:.2f}.", reward, info

    def sample_random_action(self) -> str:
        refs = self.references
        if self.extract_boxed:
            choice = self.rng.choice(["True", "False", "Unknown", *refs[:1]])
            return f"\\boxed{{{choice}}}"
        choice = refs[0] if refs and self.rng.random() < 0.5 else self.rng.choice(["unknown", "yes", "42"])
        return f"<answer>{choice}</answer>"
