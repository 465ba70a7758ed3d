"""Reference-GEM answer parsers (``gem.utils.parsing``) on gem_core's linear-time extractors."""

from __future__ import annotations

from typing import Any

from gem_core.grading.code import extract_code
from gem_core.grading.extract import extract_boxed, extract_tagged_answer

__all__ = ["extract_last_boxed_answer", "extract_code_from_model", "extract_last_tagged_answer"]


def extract_last_boxed_answer(solution: Any) -> str | None:
    r"""The content of the last complete ``\boxed{...}`` (or ``\fbox{...}``), else None.

    `gem_core.grading.extract.extract_boxed`: unlike the reference, an unclosed last box
    falls back to the previous complete one, and ``\fbox`` counts.
    """
    return extract_boxed(solution)


def extract_code_from_model(model_response: Any) -> str | None:
    """The last fenced Python (or untagged) code block, stripped, else None.

    `gem_core.grading.code.extract_code`: unlike the reference, blocks tagged with another
    language (```` ```bash ````) are skipped.
    """
    if not isinstance(model_response, str):
        return None
    code = extract_code(model_response)
    return None if code is None else code.strip()


def extract_last_tagged_answer(model_response: Any) -> str | None:
    """The stripped content of the last complete ``<answer>...</answer>``, else None."""
    answer = extract_tagged_answer(model_response, "answer")
    return None if answer is None else answer.strip()
