"""Reference ``gem.utils.seeding``: `np_random`, `set_seed`, `RNG`."""

from __future__ import annotations

import random

import numpy as np

from gem_core.seeding import np_random

__all__ = ["np_random", "set_seed", "RNG", "RandomNumberGenerator"]

RNG = RandomNumberGenerator = np.random.Generator


def set_seed(seed: int | None = None) -> None:
    """Seed the global ``random`` and ``numpy`` generators (as the reference)."""
    random.seed(seed)
    np.random.seed(None if seed is None else seed % 2**32)
