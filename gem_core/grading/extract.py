r"""Answer extraction shared by every env: the last ``\boxed{...}`` and the last ``<answer>...</answer>``.

One implementation of each, used by the games, math, QA, ReasoningGym and MCP-task envs.
Both are linear in the length of the text on any input (no regex backtracking, no rescans
from every unclosed opener) and import nothing but `re`, so a game can use them without
loading a grader.

>>> extract_boxed(r"so \boxed{1} ... finally \boxed{\frac{1}{2}} and \boxed{3")
'\\frac{1}{2}'
>>> extract_tagged_answer("<answer>draft <answer> final </answer>")
'final'
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_BOX_CHARS",
    "boxed_span",
    "extract_boxed",
    "extract_tagged_answer",
    "tagged_span",
]

MAX_BOX_CHARS = 20_000
"""Default longest box content: a longer box is not an answer (skipped like an unclosed one)."""

# A box opener: ``\boxed{`` / ``\fbox{`` (spaces allowed before the brace), or the
# brace-less ``\boxed 5`` / ``\boxed \pi`` form (group 1: its one-token content, which
# holds no brace, ``$``, space or inner backslash, so it never swallows another opener).
_OPENER = r"\\(?:boxed|fbox)(?:\s*\{|\s+(?!\\(?:boxed|fbox))(\\?[^\s${}\\]+))"
_BOX_AT = re.compile(_OPENER)
# Everything the full pass looks at: box openers and plain braces.
_TOKENS = re.compile(_OPENER + r"|[{}]")


def boxed_span(text: Any, max_chars: int | None = MAX_BOX_CHARS) -> tuple[int, int] | None:
    r"""Where the content of the last complete ``\boxed{...}`` / ``\fbox{...}`` lies in ``text``.

    "Last" is the box that *starts* last among the complete ones: braces may nest
    (``\boxed{\frac{1}{2}}``), an unclosed box is skipped in favour of the last complete
    one before it, and so is a box whose content is longer than ``max_chars``.
    ``\boxed 5`` (no braces: one token up to whitespace, ``$`` or a brace) counts too.
    Escaped braces (``\{``, ``\}``) count like any other: LaTeX keeps them balanced.

    Args:
        text: the response; anything but a string gives ``None``.
        max_chars: longest box content accepted (``None``: no limit).

    Returns:
        ``(start, end)`` with ``text[start:end]`` the box content, or ``None``.
    """
    if not isinstance(text, str):
        return None
    last = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if last < 0:
        return None
    limit = len(text) if max_chars is None else max_chars
    # Fast path: the last box opener is complete and holds no nested brace.
    m = _BOX_AT.match(text, last)
    if m is not None:
        if m.group(1) is not None:
            if len(m.group(1)) <= limit:
                return m.span(1)
        else:
            i = m.end()
            close = text.find("}", i, i + limit + 1)
            if close >= 0 and text.find("{", i, close) < 0:
                return i, close
    # Full pass: match every brace with a stack (one pass, O(len(text))) and keep the
    # complete box with the largest start.
    first = min(p for p in (text.find("\\boxed"), text.find("\\fbox")) if p >= 0)
    stack: list[int] = []  # the content start of an open box, or -1 for a plain brace
    best: tuple[int, int] | None = None
    for m in _TOKENS.finditer(text, first):
        token = m.group()
        if token == "}":
            if stack:
                start = stack.pop()
                if start >= 0 and m.start() - start <= limit and (best is None or start > best[0]):
                    best = (start, m.start())
        elif token == "{":
            stack.append(-1)
        elif m.group(1) is not None:
            if len(m.group(1)) <= limit:
                best = m.span(1)  # starts after every box seen so far
        else:
            stack.append(m.end())
    return best


def extract_boxed(text: Any, max_chars: int | None = MAX_BOX_CHARS) -> str | None:
    r"""The content of the last complete ``\boxed{...}`` / ``\fbox{...}`` in ``text`` (not stripped).

    See `boxed_span` for which box counts. Non-string input and text without a complete
    box (of at most ``max_chars`` characters) give ``None``.

    >>> extract_boxed(r"first \boxed{1} then \boxed{{2}} and \boxed{3")
    '{2}'
    >>> extract_boxed(r"\fbox{7}"), extract_boxed(r"$\boxed 5$"), extract_boxed("none")
    ('7', '5', None)
    """
    if type(text) is str:
        # Fast path (a game move, a final answer): the last opener is ``\boxed{`` with flat
        # content and no backslash after it, so no later opener exists: what `boxed_span`
        # returns, at a third of its cost.
        _, opener, tail = text.rpartition("\\boxed{")
        if opener and "\\" not in tail:
            content, close, _ = tail.partition("}")
            if close and "{" not in content and (max_chars is None or len(content) <= max_chars):
                return content
    span = boxed_span(text, max_chars)
    return None if span is None else text[span[0] : span[1]]


def tagged_span(text: Any, tag: str = "answer") -> tuple[int, int] | None:
    """Where the content of the last complete ``<tag>...</tag>`` lies in ``text``.

    The last closing tag and the nearest opening tag before it delimit the content, so
    ``"<answer>draft <answer>final</answer>"`` gives the span of ``"final"``. Two `rfind`
    calls: linear on any input.

    Returns:
        ``(start, end)`` with ``text[start:end]`` the content, or ``None`` when there is
        no complete pair (or ``text`` is not a string).
    """
    if not isinstance(text, str):
        return None
    open_, close_ = f"<{tag}>", f"</{tag}>"
    end = text.rfind(close_)
    if end < 0:
        return None
    start = text.rfind(open_, 0, end)
    if start < 0:
        return None
    return start + len(open_), end


def extract_tagged_answer(text: Any, tag: str = "answer") -> str | None:
    """The stripped content of the last complete ``<answer>...</answer>`` in ``text``.

    See `tagged_span`; ``tag`` names another tag (``"think"``, ...). Returns ``None``
    when there is no complete pair.

    >>> extract_tagged_answer("<answer>one</answer> then <answer> two </answer>")
    'two'
    """
    span = tagged_span(text, tag)
    return None if span is None else text[span[0] : span[1]].strip()
