"""Linear-time readers of model text for the tools: tagged blocks and size/depth-bounded JSON.

Everything here runs in time linear in the length of its input, whatever the input: blocks
are found with `str.find`/`str.rfind` (no regular expression scans a block's body), and
JSON is pre-scanned for its nesting depth before `json.loads` (whose recursive decoder
would otherwise raise `RecursionError` on ``[[[[...``).
"""

from __future__ import annotations

import json
import operator
import re
from itertools import accumulate, count
from typing import Any

__all__ = [
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "JSONLimitError",
    "first_block",
    "is_text",
    "innermost_first_block",
    "json_depth",
    "loads_bounded",
]

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays/objects accepted in a tool call's JSON (tool arguments of real
tools nest a few levels; Python's JSON decoder recurses once per level)."""
MAX_JSON_CHARS = 1_000_000
"""Longest JSON text accepted in a tool call (1 MB: far beyond any model's turn)."""

# A JSON string, or the unterminated rest of the text from a quote on. Every branch is
# forced (``[^"\\]*`` stops only at a quote or a backslash, ``\\.`` eats an escape), so a
# match never backtracks, and an unterminated string ends the scan instead of being
# retried from each escaped quote inside it.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
# Brackets as bytes (UTF-8 never puts an ASCII byte inside a multi-byte character): every
# other byte deleted, openers weighted 2 and closers 0, so that after the i-th bracket
# (from 1) the prefix sum minus i is the depth there; all of it runs in C.
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_WEIGHT = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


class JSONLimitError(ValueError):
    """JSON text over `MAX_JSON_CHARS` characters or nested deeper than `MAX_JSON_DEPTH`."""


def _brackets(text: str) -> bytes:
    """The brackets of ``text`` outside strings, as weights: 2 per opener, 0 per closer."""
    outside = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    return outside.translate(_WEIGHT, _NOT_BRACKET)


def _depth(brackets: bytes) -> int:
    if not brackets:
        return 0
    return max(0, max(map(operator.sub, accumulate(brackets), count(1))))


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings in ``text`` (an upper bound of what
    `json.loads` would recurse into; exact for valid JSON), in linear time."""
    return _depth(_brackets(text))


def loads_bounded(
    text: str, *, max_depth: int = MAX_JSON_DEPTH, max_chars: int = MAX_JSON_CHARS
) -> Any:
    """`json.loads` of model text, refusing what is too long or too deep before decoding.

    Raises:
        JSONLimitError: ``text`` has more than ``max_chars`` characters or nests deeper
            than ``max_depth`` levels (the message says which, and the limit).
        json.JSONDecodeError: ``text`` is not valid JSON.
    """
    if len(text) > max_chars:
        raise JSONLimitError(f"the JSON has {len(text)} characters; at most {max_chars} are allowed")
    brackets = _brackets(text)
    # A run of openers is the usual attack; finding one is a memchr-speed scan.
    if b"\x02" * (max_depth + 1) in brackets or _depth(brackets) > max_depth:
        raise JSONLimitError(
            f"the JSON nests more than {max_depth} levels deep; at most {max_depth} levels "
            "are allowed"
        )
    try:
        return json.loads(text)
    except RecursionError:  # not reachable under the depth check; kept as a backstop
        raise JSONLimitError(
            f"the JSON nests too deep to decode; at most {max_depth} levels are allowed"
        ) from None


def is_text(value: str) -> bool:
    """Whether ``value`` is valid Unicode text: no lone surrogate (a JSON ``"\\udcff"``),
    which no database, JSON writer or MCP server accepts."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_block(text: str, opener: str, closer: str) -> tuple[int, int, int] | None:
    """The leftmost ``opener`` that is followed by a ``closer``, and the first such closer.

    Returns ``(start, body_start, body_end)`` (the block is ``text[start:body_end +
    len(closer)]``) or ``None``. Same result as the regex ``opener(.*?)closer`` with DOTALL:
    if the leftmost opener has no closer after it, no later opener has one either.
    """
    start = text.find(opener)
    if start < 0:
        return None
    body = start + len(opener)
    end = text.find(closer, body)
    if end < 0:
        return None
    return start, body, end


def innermost_first_block(text: str, opener: str, closer: str) -> tuple[int, int, int] | None:
    """The first complete block whose body holds no ``opener``: the last opener before the
    first closer that follows an opener.

    Returns ``(start, body_start, body_end)`` or ``None``; same result as the regex
    ``opener((?:(?!opener).)*?)closer`` with DOTALL, for tags that cannot overlap each
    other (such as ``<search>`` and ``</search>``).
    """
    first = text.find(opener)
    if first < 0:
        return None
    end = text.find(closer, first + len(opener))
    if end < 0:
        return None
    start = text.rfind(opener, first, end)
    return start, start + len(opener), end
