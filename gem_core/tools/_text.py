"""Linear-time readers of model text for the tools: tagged blocks and size/depth-bounded JSON.

Everything here runs in time linear in the length of its input, whatever the input: blocks
are found with `str.find`/`str.rfind` (no regular expression scans a block's body), and
JSON is pre-scanned for its nesting depth before `json.loads` (whose recursive decoder
would otherwise raise `RecursionError` on ``[[[[...``).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

__all__ = [
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "JSONLimitError",
    "first_block",
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
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DELTA = {"[": 1, "{": 1, "]": -1, "}": -1}


class JSONLimitError(ValueError):
    """JSON text over `MAX_JSON_CHARS` characters or nested deeper than `MAX_JSON_DEPTH`."""


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings in ``text`` (an upper bound of what
    `json.loads` would recurse into; exact for valid JSON), in linear time."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(0, max(accumulate(map(_DELTA.__getitem__, brackets))))


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
    depth = json_depth(text)
    if depth > max_depth:
        raise JSONLimitError(
            f"the JSON nests {depth} levels deep; at most {max_depth} levels are allowed"
        )
    try:
        return json.loads(text)
    except RecursionError:  # not reachable under the depth check; kept as a backstop
        raise JSONLimitError(
            f"the JSON nests too deep to decode; at most {max_depth} levels are allowed"
        ) from None


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
