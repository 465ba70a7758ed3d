"""Word lists shipped with the package (offline), loaded lazily and cached once per process.

Two lists live in ``gem_core/envs/games/data/`` (sources and licences in ``SOURCES.md``):

- ``"common"``: about 8,200 common English words of 3-12 letters (nouns, verbs,
  adjectives and the BIP-39 list) — the secret words of Wordle and Hangman.
- ``"web2"``: about 49,500 dictionary words of 3-7 letters (Webster's Second, public
  domain) — Wordle's extra valid guesses and Hangman's ``hardcore`` secret words.

Words are returned upper-case, sorted, without duplicates.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from gem_core.errors import InvalidArgument

__all__ = ["WORD_LISTS", "words", "word_set", "lengths"]

WORD_LISTS = ("common", "web2")


@cache
def _load(name: str) -> dict[int, tuple[str, ...]]:
    if name not in WORD_LISTS:
        raise InvalidArgument(f"unknown word list {name!r}; expected one of {WORD_LISTS}")
    text = (resources.files("gem_core.envs.games") / "data" / f"words_{name}.txt").read_text("ascii")
    by_length: dict[int, list[str]] = {}
    for word in sorted(set(text.upper().split())):
        by_length.setdefault(len(word), []).append(word)
    return {n: tuple(ws) for n, ws in by_length.items()}


def words(name: str, length: int) -> tuple[str, ...]:
    """The words of ``length`` letters in list ``name`` (empty when there are none)."""
    return _load(name).get(length, ())


@cache
def word_set(name: str, length: int) -> frozenset[str]:
    """`words` as a set, for membership tests."""
    return frozenset(words(name, length))


def lengths(name: str) -> tuple[int, ...]:
    """The word lengths present in list ``name``."""
    return tuple(sorted(_load(name)))
