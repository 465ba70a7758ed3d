"""Reference ``gem.utils.qa_em``: exact match on gem_core's QA grading (`gem_core.grading.qa`).

`normalize_answer` is SQuAD's (lower case, no punctuation, no articles, single spaces);
`em_check` is ``exact_match``: unlike the reference, an answer or reference that
normalises to nothing matches nothing (an empty answer never pays).
"""

from __future__ import annotations

from typing import Any

from gem_core.grading.qa import exact_match, normalize_answer

__all__ = ["em_check", "normalize_answer"]


def em_check(prediction: str, golden_answers: Any) -> bool:
    """Whether ``prediction`` equals one of ``golden_answers`` (a string or a list) after normalising."""
    return exact_match(prediction, golden_answers)
