"""Plays a game's one-frame `step` and LanguageGame's general path side by side (the fast-path equivalence tests)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any


def play_side_by_side(fast: Any, general: Any, seeds: Iterable[int], next_action: Callable[[Any], Any],
                      state: Callable[[Any], Any]) -> Counter:
    """Step ``fast`` (the game class) and ``general`` (a subclass: the general path) with the
    same actions until every episode ends; each step must return the same observation,
    reward, flags and info and leave the same ``state(env)``.

    Returns counts of ``steps``, ``moves`` (readable moves that did not end the episode),
    ``valid`` (those of them that were legal) and ``solved`` episodes, so a test can check
    that every path was exercised.
    """
    assert type(fast)._fast_step and not type(general)._fast_step
    counts: Counter = Counter()
    for seed in seeds:
        assert fast.reset(seed=seed) == general.reset(seed=seed)
        done = False
        while not done:
            action = next_action(fast)
            out_fast, out_general = fast.step(action), general.step(action)
            assert out_fast == out_general, (seed, action)
            assert type(out_fast[1]) is float
            assert state(fast) == state(general), (seed, action)
            info = out_fast[4]
            moved = "parsed_action" in info and not out_fast[2]
            counts["steps"] += 1
            counts["moves"] += moved
            counts["valid"] += moved and not info["invalid_action"]
            counts["solved"] += bool(info["success"])
            done = out_fast[2] or out_fast[3]
    return counts
