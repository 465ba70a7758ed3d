"""QA answer grading: SQuAD normalisation, exact match and token F1.

The answer itself is extracted by `gem_core.grading.extract.extract_tagged_answer`.

The metrics follow the SQuAD evaluation script's definitions: both prediction and
reference are normalised (`normalize_answer`), exact match compares the normalised
strings, and F1 is the harmonic mean of token precision and recall over the normalised
tokens (counted with multiplicity). With several references the best score counts.

One departure from SQuAD, so that success cannot be had for nothing: an answer that
normalises to nothing (``""``, ``"."``, ``"the"``) is never correct. The SQuAD script
would grade it correct against any reference that also normalises to nothing (``"A"``,
as in "vitamin A", loses its only token as an article). Such a text is compared by its
tokens with the articles kept (`answer_tokens`), so ``"a"`` still matches ``"A"`` while
``"the"``, ``"."`` and ``""`` do not; an empty reference matches nothing.

Hedging: F1 pays a prediction that lists several candidates. If the truth is "Paris" or
"Lyon", a guess earns 0.5 in expectation but ``"Paris Lyon"`` earns 2/3 for sure
(precision 1/2, recall 1), so a policy trained on F1 learns to hedge. Exact match does not
pay hedges and is the recommended RL reward; F1 is a report metric. For an F1 reward, use
``f1_score(..., length_penalty=True)``: each reference's F1 is multiplied by
``min(1, reference tokens / prediction tokens)`` (a prediction no longer than the reference
is not scaled; recall already charges it). A penalised score is then at most the precision,
so against candidates that share no token the scores of any one prediction sum to at most
1, and no hedge earns more in expectation than naming the likeliest candidate
(``"Paris Lyon"`` now earns 1/3).

>>> normalize_answer("The  Eiffel-Tower!")
'eiffeltower'
>>> exact_match("the Eiffel Tower", ["Eiffel Tower", "Paris"])
True
>>> round(f1_score("Eiffel Tower in Paris", "the Eiffel Tower"), 3)
0.667
>>> round(f1_score("Eiffel Tower in Paris", "the Eiffel Tower", length_penalty=True), 3)
0.333
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

from gem_core.errors import InvalidArgumentType

__all__ = [
    "MAX_ANSWER_CHARS",
    "normalize_answer",
    "answer_tokens",
    "as_references",
    "exact_match",
    "f1_score",
]

MAX_ANSWER_CHARS = 10_000
"""Longest extracted answer that is graded; a longer one is a format error in the QA env."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop the articles a/an/the,
    collapse whitespace.

    Punctuation is ASCII punctuation (`string.punctuation`), removed without a space, so
    ``"Jean-Paul"`` becomes ``"jeanpaul"`` (the SQuAD script's behaviour).
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """The tokens exact match and F1 compare: those of `normalize_answer`, or, when that
    leaves nothing, the lower-cased tokens without punctuation but with the articles kept
    (``"A"`` gives ``["a"]``, ``"."`` gives ``[]``)."""
    tokens = normalize_answer(text).split()
    if tokens:
        return tokens
    return "".join(ch for ch in text.lower() if ch not in _PUNCTUATION).split()


def as_references(references: Any) -> list[str]:
    """References as a list of strings.

    Accepts a string, a number, or a list/tuple of them (numbers become their `str`);
    ``None`` and an empty list give ``[]`` (nothing can match).

    Raises:
        TypeError: another type (e.g. a dict), naming what arrived.
    """
    if references is None:
        return []
    if isinstance(references, (str, int, float)) and not isinstance(references, bool):
        return [str(references)]
    if isinstance(references, (list, tuple)):
        out = []
        for ref in references:
            if isinstance(ref, (list, tuple)):  # nested lists (some datasets): flatten one level
                out.extend(str(r) for r in ref)
            elif ref is not None:
                out.append(str(ref))
        return out
    raise InvalidArgumentType(
        f"QA references must be a string, a number or a list of them; got "
        f"{type(references).__name__}: {str(references)[:80]!r}. Check the dataset's answer column."
    )


def exact_match(prediction: str, references: str | Sequence[str]) -> bool:
    """Whether the normalised prediction equals any normalised reference.

    Args:
        prediction: the agent's answer.
        references: one reference or a list of acceptable ones (see `as_references`).

    Returns:
        True on a match; False for no references and for an answer or reference without
        tokens (see the module docstring).
    """
    pred = answer_tokens(prediction)
    return bool(pred) and any(pred == answer_tokens(ref) for ref in as_references(references))


def _f1(pred_tokens: list[str], ref_tokens: list[str]) -> float:
    if not pred_tokens or not ref_tokens:
        return 0.0  # SQuAD scores two empty answers 1.0: an empty answer would then pay
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(
    prediction: str, references: str | Sequence[str], *, length_penalty: bool = False
) -> float:
    """Token F1 of the prediction against the best-matching reference, in ``[0, 1]``.

    Plain F1 pays hedging (see the module docstring): prefer `exact_match` as an RL reward,
    or set ``length_penalty``.

    Args:
        prediction: the agent's answer.
        references: one reference or a list of acceptable ones (see `as_references`).
        length_penalty: scale each reference's F1 by ``min(1, len(reference tokens) /
            len(prediction tokens))`` before the best is taken, so that listing several
            answers no longer pays more than a guess (the score is at most the precision).

    Returns:
        The maximum (penalised) F1 over the references; 0.0 for no references, and for a
        prediction or reference without tokens (`answer_tokens`).
    """
    pred = answer_tokens(prediction)
    best = 0.0
    for ref in as_references(references):
        ref_tokens = answer_tokens(ref)
        score = _f1(pred, ref_tokens)
        if length_penalty and len(pred) > len(ref_tokens):
            score *= len(ref_tokens) / len(pred)
        best = max(best, score)
    return best
