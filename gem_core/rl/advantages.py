r"""Advantage estimators: pure numpy functions over flat transition arrays.

Notation: an episode has turns ``t = 0 .. T-1`` with rewards ``r_t``; a batch holds many
episodes; a *transition* is one (episode, turn) pair.

- `discounted_returns`: ``G_t = sum_{k>=0} gamma^k r_{t+k}`` per episode.
- `rebn` (Return Batch Normalization): ``A = (G - mean(G)) / (std(G) + eps)`` over all
  transitions of the batch (population std, ``ddof=0``).
- `grpo`: per group of episodes of the same task, ``A_i = (R_i - mean_g R) /
  (std_g R + eps)`` (sample std, ``ddof=1``, as TRL and verl do), or without the std
  division (``scale_by_std=False``).
- `dr_grpo`: ``A_i = R_i - mean_g R`` (Dr. GRPO: no std scaling).
- `rloo`: ``A_i = R_i - mean_{j != i, j in g} R_j``.
- `reinforce`: ``A = G`` or ``A = G - mean(G)`` (``baseline="mean"``).
- `gae`: generalized advantage estimation for critic-based PPO.

`compute_advantages` turns a batch of `Episode` objects into per-turn advantages;
`per_turn_advantages` does the same from plain per-turn reward arrays.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from gem_core.errors import InvalidArgument

if TYPE_CHECKING:
    from gem_core.rl.types import Episode

__all__ = [
    "ESTIMATORS",
    "discounted_returns",
    "rebn",
    "grpo",
    "dr_grpo",
    "rloo",
    "reinforce",
    "gae",
    "compute_advantages",
    "per_turn_advantages",
]

ESTIMATORS = ("rebn", "grpo", "dr_grpo", "rloo", "reinforce")


def _check_gamma(gamma: float, name: str = "gamma") -> float:
    g = float(gamma)
    if not (0.0 <= g <= 1.0):
        raise InvalidArgument(f"{name} must be in [0, 1], got {gamma!r}")
    return g


def _check_eps(eps: float) -> float:
    e = float(eps)
    if not (e > 0.0 and np.isfinite(e)):
        raise InvalidArgument(f"eps must be a positive finite float, got {eps!r}")
    return e


def _flat(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidArgument(f"{name} must be a flat (1-D) array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidArgument(
            f"{name} must be finite, got {arr[~np.isfinite(arr)][:3]} among its values"
        )
    return arr


def discounted_returns(
    rewards_per_episode: Sequence[Sequence[float]], gamma: float
) -> list[np.ndarray]:
    r"""Per-turn discounted returns of each episode.

    ``G_t = r_t + gamma * G_{t+1}`` with ``G_T = 0``, i.e. ``G_t = sum_k gamma^k r_{t+k}``.
    ``gamma = 0`` gives the per-turn rewards; ``gamma = 1`` the reward-to-go.

    Args:
        rewards_per_episode: one sequence of per-turn rewards per episode.
        gamma: discount factor, ``0 <= gamma <= 1``.

    Returns:
        One float64 array per episode, the same length as its rewards.
    """
    g = _check_gamma(gamma)
    out: list[np.ndarray] = []
    for i, rewards in enumerate(rewards_per_episode):
        r = _flat(rewards, f"rewards of episode {i}")
        returns = np.empty_like(r)
        running = 0.0
        for t in range(len(r) - 1, -1, -1):
            running = r[t] + g * running
            returns[t] = running
        out.append(returns)
    return out


def rebn(returns: Sequence[float] | np.ndarray, eps: float = 1e-8) -> np.ndarray:
    r"""Return Batch Normalization: ``(G - mean(G)) / (std(G) + eps)``.

    The mean and the *population* standard deviation (``ddof=0``) are taken over all
    transitions of the batch (every turn of every episode, flattened). On a constant
    input the result is (close to) zero and finite: ``eps`` keeps the division defined.

    Args:
        returns: flat array of per-transition returns.
        eps: added to the std, ``> 0``.

    Returns:
        float64 array, same shape as ``returns`` (empty in, empty out).
    """
    g = _flat(returns, "returns")
    e = _check_eps(eps)
    if g.size == 0:
        return g.copy()
    centered = g - g.mean()
    std = np.sqrt(np.mean(centered**2))
    return centered / (std + e)


def _group_index(group_ids: Sequence[Hashable] | np.ndarray, n: int) -> tuple[np.ndarray, int]:
    ids = list(group_ids)
    if len(ids) != n:
        raise InvalidArgument(f"group_ids has {len(ids)} entries but there are {n} episode returns")
    index: dict[Hashable, int] = {}
    inverse = np.fromiter((index.setdefault(k, len(index)) for k in ids), dtype=np.int64, count=n)
    return inverse, len(index)


def _group_stats(r: np.ndarray, inverse: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(inverse, minlength=k).astype(np.float64)
    means = np.bincount(inverse, weights=r, minlength=k) / np.maximum(counts, 1.0)
    return counts, means


def grpo(
    episode_returns: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable] | np.ndarray,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> np.ndarray:
    r"""GRPO advantages: normalise each episode return within its group.

    ``A_i = (R_i - mean_g) / (std_g + eps)`` where ``mean_g`` and ``std_g`` are the mean
    and the *sample* standard deviation (``ddof=1``, as in TRL and verl) of the returns
    in episode ``i``'s group. A group of one episode has ``std_g`` taken as 0, so its
    advantage is 0. With ``scale_by_std=False``: ``A_i = R_i - mean_g`` (see `dr_grpo`).

    Args:
        episode_returns: one return per episode.
        group_ids: one hashable group id per episode (episodes of the same task).
        scale_by_std: divide by the group std.
        eps: added to the std.

    Returns:
        One advantage per episode (float64).
    """
    r = _flat(episode_returns, "episode_returns")
    e = _check_eps(eps)
    inverse, k = _group_index(group_ids, r.size)
    counts, means = _group_stats(r, inverse, k)
    centered = r - means[inverse]
    if not scale_by_std:
        return centered
    sq = np.bincount(inverse, weights=centered**2, minlength=k)
    std = np.sqrt(sq / np.maximum(counts - 1.0, 1.0))
    return centered / (std[inverse] + e)


def dr_grpo(
    episode_returns: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable] | np.ndarray,
) -> np.ndarray:
    r"""Dr. GRPO advantages: ``A_i = R_i - mean_g`` (group mean baseline, no std scaling).

    Dr. GRPO also drops the per-sequence length normalisation of the loss; that part is
    the trainer's loss aggregation (sum over tokens divided by a constant), not the
    advantage.
    """
    return grpo(episode_returns, group_ids, scale_by_std=False)


def rloo(
    episode_returns: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable] | np.ndarray,
) -> np.ndarray:
    r"""REINFORCE Leave-One-Out: ``A_i = R_i - (sum_{j in g} R_j - R_i) / (n_g - 1)``.

    Equivalently ``n_g / (n_g - 1) * (R_i - mean_g)``. A group of one episode has no
    baseline sample; its advantage is 0.
    """
    r = _flat(episode_returns, "episode_returns")
    inverse, k = _group_index(group_ids, r.size)
    counts, means = _group_stats(r, inverse, k)
    n = counts[inverse]
    out = np.zeros_like(r)
    multi = n > 1
    out[multi] = n[multi] / (n[multi] - 1.0) * (r[multi] - means[inverse][multi])
    return out


def reinforce(returns: Sequence[float] | np.ndarray, baseline: str = "none") -> np.ndarray:
    r"""Plain REINFORCE: the advantage is the return ``G``.

    Args:
        returns: flat per-transition (or per-episode) returns.
        baseline: ``"none"`` (``A = G``) or ``"mean"`` (``A = G - mean(G)`` over the
            batch: lower variance, no scaling).

    Returns:
        float64 array, same shape as ``returns``.
    """
    g = _flat(returns, "returns")
    if baseline == "none":
        return g.copy()
    if baseline == "mean":
        return g - g.mean() if g.size else g.copy()
    raise InvalidArgument(f"baseline must be 'none' or 'mean', got {baseline!r}")


def gae(
    rewards: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    gamma: float,
    lam: float,
    *,
    last_value: float = 0.0,
    terminated: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Generalized Advantage Estimation for one episode (or episode fragment).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` and ``A_t = delta_t + gamma * lam * A_{t+1}``
    with ``A_T = 0``. The value after the last turn, ``V_T``, is 0 when the episode
    ``terminated`` (a terminal state has no future reward) and ``last_value`` otherwise
    (a truncated episode or a fragment is *bootstrapped* from the critic's estimate of
    the state it stopped in). ``lam = 1`` gives ``G_t - V_t``; ``lam = 0`` the one-step
    TD error.

    Args:
        rewards: per-turn rewards ``r_0 .. r_{T-1}``.
        values: critic values ``V_0 .. V_{T-1}`` of the states the turns acted in.
        gamma: discount, ``0 <= gamma <= 1``.
        lam: GAE lambda, ``0 <= lam <= 1``.
        last_value: ``V_T`` used when not ``terminated``.
        terminated: whether the episode reached a terminal state.

    Returns:
        ``(advantages, returns)`` with ``returns = advantages + values`` (the critic's
        regression targets), float64 arrays of length T.
    """
    r = _flat(rewards, "rewards")
    v = _flat(values, "values")
    if r.shape != v.shape:
        raise InvalidArgument(
            f"rewards and values must have the same length, got {r.size} and {v.size}"
        )
    g = _check_gamma(gamma)
    lm = _check_gamma(lam, "lam")
    next_value = 0.0 if terminated else float(last_value)
    adv = np.empty_like(r)
    running = 0.0
    for t in range(r.size - 1, -1, -1):
        delta = r[t] + g * next_value - v[t]
        running = delta + g * lm * running
        adv[t] = running
        next_value = v[t]
    return adv, adv + v


def per_turn_advantages(
    rewards_per_episode: Sequence[Sequence[float] | np.ndarray],
    estimator: str = "rebn",
    *,
    gamma: float = 1.0,
    group_ids: Sequence[Hashable] | None = None,
    eps: float | None = None,
    baseline: str = "none",
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    r"""Per-turn advantages and discounted returns from per-turn rewards (no `Episode` needed).

    The estimators of `compute_advantages`, over plain reward arrays: the adapter kit
    (`gem_core.rl.packing`) calls it with the turns it reads from a trainer's token rows.

    Args:
        rewards_per_episode: one sequence of per-turn rewards per episode; every episode
            enters the batch statistics (leave out rows without turns).
        estimator: one of `ESTIMATORS`.
        gamma: discount factor for the returns.
        group_ids: one group id per episode; required by ``"grpo"``, ``"dr_grpo"`` and
            ``"rloo"``.
        eps: std offset (default 1e-8 for ReBN, 1e-6 for GRPO).
        baseline: for ``"reinforce"`` only (``"none"`` or ``"mean"``).

    Returns:
        ``(advantages, returns)``: two lists with one float64 array per episode, aligned
        with its rewards; ``returns`` are the discounted per-turn returns ``G_t``.
    """
    returns = discounted_returns(rewards_per_episode, gamma)
    lengths = [len(r) for r in returns]
    flat = np.concatenate(returns) if returns else np.zeros(0)

    def split(values: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(a) for a in np.split(values, np.cumsum(lengths)[:-1])] if lengths else []

    if estimator == "rebn":
        return split(rebn(flat, eps=1e-8 if eps is None else eps)), returns
    if estimator == "reinforce":
        return split(reinforce(flat, baseline=baseline)), returns
    if estimator in ("grpo", "dr_grpo", "rloo"):
        if group_ids is None:
            raise InvalidArgument(
                f"estimator {estimator!r} needs group_ids (one per episode: episodes of the "
                "same task share an id)"
            )
        ep_returns = np.array([r[0] if r.size else 0.0 for r in returns], dtype=np.float64)
        if estimator == "grpo":
            per_ep = grpo(ep_returns, group_ids, eps=1e-6 if eps is None else eps)
        elif estimator == "dr_grpo":
            per_ep = dr_grpo(ep_returns, group_ids)
        else:
            per_ep = rloo(ep_returns, group_ids)
        advantages = [np.full(n, a, dtype=np.float64) for n, a in zip(lengths, per_ep, strict=True)]
        return advantages, returns
    raise InvalidArgument(
        f"unknown estimator {estimator!r}: expected one of {', '.join(ESTIMATORS)} "
        "(GAE needs critic values: call gem_core.rl.advantages.gae per episode)"
    )


def compute_advantages(
    episodes: Sequence[Episode],
    estimator: str = "rebn",
    *,
    gamma: float = 1.0,
    group_ids: Sequence[Hashable] | None = None,
    eps: float | None = None,
    baseline: str = "none",
) -> list[np.ndarray]:
    r"""Per-turn advantages of a batch of episodes.

    - ``"rebn"``: discounted per-turn returns, then `rebn` over all turns of the batch.
    - ``"reinforce"``: discounted per-turn returns (minus their batch mean with
      ``baseline="mean"``), see `reinforce`.
    - ``"grpo"``, ``"dr_grpo"``, ``"rloo"``: the episode return ``G_0`` (discounted from
      the first turn; the plain sum for ``gamma = 1``) is normalised within its group,
      and every turn of the episode gets the episode's advantage.

    Pass only the episodes you train on (e.g. drop those with ``episode.error``): they
    all enter the batch statistics. Episodes without turns get empty arrays.

    A turn that generated no token follows the adapter kit's empty-turn rule
    (`gem_core.rl.packing`): it is not a transition, its reward is credited to the
    generated turn before it (or, if none, the first one after it), and its advantage is
    0. So these advantages equal the kit's `token_advantages` on the packed rows.

    Args:
        episodes: the batch.
        estimator: one of `ESTIMATORS`.
        gamma: discount factor for the returns.
        group_ids: one group id per episode for the group estimators; default
            ``episode.group_id`` (set by the collector to ``"env_id/seed"``), falling
            back to ``(env_id, seed)``.
        eps: std offset (default 1e-8 for ReBN, 1e-6 for GRPO).
        baseline: for ``"reinforce"`` only (``"none"`` or ``"mean"``).

    Returns:
        One float64 array per episode, aligned with ``episode.turns``.
    """
    if group_ids is None and estimator in ("grpo", "dr_grpo", "rloo"):
        group_ids = [
            ep.group_id if ep.group_id is not None else (ep.env_id, ep.seed) for ep in episodes
        ]
    from gem_core.rl.packing import credited_rewards

    credited: list[list[float]] = []
    generated: list[list[bool]] = []
    for ep in episodes:
        gen = [len(t.response_ids) > 0 for t in ep.turns]
        credited.append(credited_rewards(ep.rewards(), gen)[0])
        generated.append(gen)
    per_generated, _ = per_turn_advantages(
        credited,
        estimator,
        gamma=gamma,
        group_ids=group_ids,
        eps=eps,
        baseline=baseline,
    )
    advantages = []
    for gen, adv in zip(generated, per_generated, strict=True):
        out = np.zeros(len(gen), dtype=np.float64)
        out[np.asarray(gen, dtype=bool)] = adv
        advantages.append(out)
    return advantages
