"""Reference-GEM answer parsers (``gem.utils.parsing``) on gem_core's linear-time extractors."""

from __future__ import annotations

from typing import Any

from gem_core.grading.code import extract_code
from gem_core.grading.extract import boxed_span, extract_boxed, extract_tagged_answer

__all__ = [
    "extract_last_boxed_answer",
    "extract_code_from_model",
    "extract_last_tagged_answer",
    "last_boxed_only_string",
    "remove_boxed",
]


def last_boxed_only_string(string: Any) -> str | None:
    r"""The last complete box with its command and braces (``\boxed{x}``), else None.

    The box `extract_last_boxed_answer` reads (`gem_core.grading.extract.boxed_span`).
    """
    span = boxed_span(string)
    if span is None:
        return None
    start, end = span
    opened = string.rfind("\\", 0, start)
    head = string[opened:start]
    return head + string[start:end] + ("}" if head.endswith("{") else "")


def remove_boxed(s: Any) -> str | None:
    r"""``x`` from ``\boxed{x}`` (the whole string must be one box), else None."""
    left = "\\boxed{"
    if isinstance(s, str) and s.startswith(left) and s.endswith("}"):
        return s[len(left) : -1]
    return None


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
