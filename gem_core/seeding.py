"""Per-env random generators; gem_core never touches the global `random`/`numpy` state."""

from __future__ import annotations

import random
import secrets
import sys
from typing import TYPE_CHECKING

from gem_core.errors import InvalidArgument

if TYPE_CHECKING:
    import numpy as np

__all__ = ["np_random", "py_random", "check_seed"]


def check_seed(seed: object) -> int:
    """Return ``seed`` as a non-negative int, or raise `InvalidArgument`."""
    if not isinstance(seed, int) and "numpy" in sys.modules:
        # A numpy integer can only exist once numpy is imported: never import it here.
        import numpy as np

        if isinstance(seed, np.integer):
            seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgument(f"seed must be a non-negative int or None, got {seed!r}")
    return seed


def np_random(seed: int | None = None) -> tuple[np.random.Generator, int]:
    """A numpy `Generator` and the seed used (drawn from OS entropy when ``None``)."""
    import numpy as np

    if seed is None:
        seed = secrets.randbits(63)
    seed = check_seed(seed)
    return np.random.default_rng(seed), seed


def py_random(seed: int | None = None) -> random.Random:
    """A `random.Random` for cheap scalar draws, seeded independently of numpy's stream."""
    if seed is None:
        return random.Random(secrets.randbits(63))
    # Salt the seed so the Python stream is not a function of numpy's first draws.
    return random.Random(f"gem_core:{check_seed(seed)}")
