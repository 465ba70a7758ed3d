"""Population-std reward normalisation: ReBN exactly, for ROLL's step-level REINFORCE.

ROLL's ``agentic_reward_norm`` divides by the *sample* std (``ddof=1``) plus ``1e-6``, so
``adv_estimator: step_reinforce`` with ``reward_normalization: {grouping: batch, method:
mean_std}`` gives ReBN times ``sqrt((n-1)/n)`` (``n`` = turns in the batch). This module is
the exact version over plain arrays (no torch, no ROLL): `normalize_returns`. The pipeline
class (`gem_roll.pipeline.GemAgenticPipeline`) calls it on ROLL's ``step_rewards``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from gem_core.errors import InvalidArgument
from gem_core.rl.advantages import rebn

__all__ = ["DEFAULT_EPS", "normalize_returns", "native_ratio"]

DEFAULT_EPS = 1e-8
"""The std offset of `gem_core.rl.advantages.rebn` (ROLL's own is 1e-6)."""


def normalize_returns(
    returns: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable] | None = None,
    *,
    eps: float = DEFAULT_EPS,
) -> np.ndarray:
    """``(G - mean) / (std + eps)`` with the population std, over the batch or per group.

    Args:
        returns: one discounted return per transition (ROLL: per step sample).
        group_ids: ``None`` normalises over the whole batch (ReBN, ROLL's ``grouping:
            batch``); otherwise one id per transition, normalised within each group (ROLL's
            ``grouping: <key>``).
        eps: added to the std (`DEFAULT_EPS`, as `gem_core.rl.advantages.rebn`).

    Returns:
        float64 array of the same length.

    Raises:
        InvalidArgument: non-finite returns, or ``group_ids`` of another length.
    """
    g = np.asarray(returns, dtype=np.float64)
    if g.ndim != 1:
        raise InvalidArgument(f"returns must be one-dimensional, got shape {g.shape}; flatten the batch first")
    if not np.all(np.isfinite(g)):
        bad = int(np.flatnonzero(~np.isfinite(g))[0])
        raise InvalidArgument(
            f"returns must be finite, got {g[bad]!r} at index {bad}; check the env's rewards "
            "(ROLL's step_scores) for NaN/inf"
        )
    if group_ids is None:
        return rebn(g, eps=eps)
    ids = list(group_ids)
    if len(ids) != g.size:
        raise InvalidArgument(
            f"group_ids must have one id per return: got {len(ids)} ids for {g.size} returns"
        )
    out = np.zeros_like(g)
    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(ids):
        groups.setdefault(key, []).append(i)
    for index in groups.values():
        out[index] = rebn(g[index], eps=eps)
    return out


def native_ratio(n: int) -> float:
    """``sqrt((n-1)/n)``: ROLL's native normalised value over the exact one, for ``n`` transitions."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise InvalidArgument(f"n must be an int >= 2 (the sample std needs two values), got {n!r}")
    return math.sqrt((n - 1) / n)
