"""Test helper: a game's `parse_move` against the regex it replaced, on short texts.

The games' former move regexes backtracked on long runs of spaces (issue 12); their
scanners must accept exactly what the regexes accepted. On short texts the regex is fast,
so it serves as the reference.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

# Whitespace beyond ASCII (``\s`` is `str.isspace`), and a non-ASCII decimal digit.
SPACES = [" ", "  ", "\t", "\n", "\u00a0", "\u2003"]
DIGITS = ["0", "1", "7", "12", "123456", "1234567", "\u0663"]


def check_against_regex(
    parse: Callable[[str], Any],
    regex: re.Pattern[str],
    convert: Callable[[re.Match[str]], Any],
    pieces: Sequence[str],
    slots: Sequence[Sequence[str]],
    *,
    strip: bool = False,
    shaped: int = 3000,
) -> None:
    """Assert ``parse(text) == convert(regex.fullmatch(text))`` (``None`` without a match).

    Texts are ``shaped`` like a move, one random choice from each of ``slots`` in turn
    (give each slot right and wrong choices, so that the texts are moves and near misses;
    a fixed seed, and at least one in twenty must be moves), and free joins of ``pieces``
    (hypothesis). ``strip``: the regex saw ``text.strip()``.
    """

    def check(text: str) -> bool:
        m = regex.fullmatch(text.strip() if strip else text)
        expected = None if m is None else convert(m)
        got = parse(text)
        assert got == expected, f"{text!r}: parse_move gave {got!r}, the regex {expected!r}"
        return m is not None

    rng = random.Random(0)
    moves = sum(check("".join(rng.choice(slot) for slot in slots)) for _ in range(shaped))
    assert moves >= shaped // 20, f"only {moves} of {shaped} shaped texts were moves: widen the slots"

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(list(pieces)), max_size=12).map("".join))
    def free(text: str) -> None:
        check(text)

    free()
