r"""The packed layout of the adapter kit: an episode as one token row, and advantages over token rows.

Trainers with a prompt/response split (verl, OpenRLHF, RL2, TRL) store a multi-turn
episode as one prompt plus one response. `pack_episode` writes that row once for every
adapter:

- ``prompt_ids``: the first turn's prompt (the rendered first observation);
- ``response_ids``: every turn's generated ids exactly as generated and, between turns,
  the next observation's token delta (the chat template's end of turn, user message and
  generation header);
- ``response_mask``: 1 on generated ids, 0 on observation ids;
- ``token_rewards``: each turn's reward on the turn's last generated id, 0 elsewhere.

A *turn* of a row is a maximal run of ``response_mask == 1`` (`turn_spans`,
`turn_index`): consecutive turns are always separated by observation tokens.

**A turn that generated no token** (an aborted or empty generation) has no token to hold
its reward and no token an advantage could train. The rule, everywhere in gem_core and
in every adapter: it is *not a transition*; its reward is credited, undiscounted, to the
generated turn before it (added on that turn's last generated token), or, when no turn
before it generated a token, to the first generated turn after it. No policy decision
lies between the credited turn and the empty one, so no discount step does either. The
per-turn estimators (`token_advantages`) therefore see one transition per generated turn
(the runs of the mask), with the empty turn's reward inside the credited turn's return;
the empty turn stays out of the batch mean and std. The sum of ``token_rewards`` equals
the episode return whenever the episode generated at least one token (an episode that
generated none has nothing to train on: its row has all-zero token rewards, and the
return is only in ``reward_score``). `PackedEpisode.credited_rewards` holds the reward
of each generated turn after this rule; `credited_rewards` computes it for any reward list.

`token_advantages` computes every per-turn estimator of `gem_core.rl.advantages` on
padded ``[batch, length]`` token rows (numpy arrays or torch tensors); `sample_advantages`
does the same for trainers that keep one sample per turn (trajectory ids and turn
indices). Only numpy is imported; torch only when the inputs are torch tensors.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gem_core.errors import InvalidArgument
from gem_core.rl.advantages import ESTIMATORS, per_turn_advantages

if TYPE_CHECKING:
    from gem_core.rl.types import Episode, Turn

__all__ = [
    "PackedEpisode",
    "pack_episode",
    "pack_turns",
    "pad_responses",
    "credited_rewards",
    "turn_spans",
    "turn_index",
    "token_advantages",
    "sample_advantages",
]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class PackedEpisode:
    """One episode (or one sample of it) as a prompt and a response row (see the module docs).

    Attributes:
        prompt_ids: the first turn's prompt ids.
        response_ids: generated ids and, between turns, observation ids.
        response_mask: 1 on generated ids, 0 on observation ids.
        response_logprobs: the sampling log-prob of each generated id, 0.0 on
            observation ids.
        token_rewards: each generated turn's credited reward on its last generated id.
        reward_score: the episode return (sum of the turn rewards).
        num_turns: the number of turns, empty ones included.
        turn_rewards: the env's reward of each turn, empty ones included.
        turn_spans: ``[start, end)`` of each turn's generated ids in ``response_ids``
            (``start == end`` for a turn that generated nothing).
        credited_rewards: the reward of each generated turn after the empty-turn rule:
            what a per-turn estimator reads from the row (one per run of the mask).

    The last three default to empty, for rows an adapter reads back from a trainer
    that does not store them.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    token_rewards: list[float]
    reward_score: float
    num_turns: int
    turn_rewards: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    credited_rewards: list[float] = field(default_factory=list)

    @property
    def token_ids(self) -> list[int]:
        """``prompt_ids + response_ids``: the whole sequence."""
        return [*self.prompt_ids, *self.response_ids]

    @property
    def loss_mask(self) -> list[int]:
        """The mask aligned with `token_ids`: 0 on the prompt, then ``response_mask``."""
        return [0] * len(self.prompt_ids) + list(self.response_mask)

    @property
    def generated_turns(self) -> list[int]:
        """The indices of the turns that generated at least one token."""
        return [k for k, (s, e) in enumerate(self.turn_spans) if e > s]


def credited_rewards(rewards: Sequence[float], generated: Sequence[bool]) -> tuple[list[float], list[int]]:
    """Apply the empty-turn rule (module docs) to one episode's per-turn rewards.

    Args:
        rewards: the reward of each turn.
        generated: whether each turn generated at least one token.

    Returns:
        ``(credited, target)``: the reward of each generated turn after crediting, and
        for every turn the index (into the generated turns) its reward went to, or -1
        when the episode generated no token at all.
    """
    if len(rewards) != len(generated):
        raise InvalidArgument(f"got {len(rewards)} rewards for {len(generated)} turns")
    slots = [k for k, g in enumerate(generated) if g]
    credited = [0.0] * len(slots)
    target: list[int] = []
    j = -1  # the last generated turn so far (index into slots)
    for r, g in zip(rewards, generated, strict=True):
        if g:
            j += 1
        t = j if j >= 0 else (0 if slots else -1)
        target.append(t)
        if t >= 0:
            credited[t] += float(r)
    return credited, target


def pack_turns(turns: Sequence[Turn], *, label: str = "episode") -> PackedEpisode:
    """Pack one training sample (a run of turns, see `gem_core.rl.Episode.samples`).

    Args:
        turns: the turns of the sample; the first one's ``prompt_ids`` is the prompt, the
            others' are observation deltas.
        label: names the sample in error messages.

    Raises:
        InvalidArgument: no turn, or a turn whose logprobs do not match its ids.
    """
    if not turns:
        raise InvalidArgument(f"{label} has no turn: nothing to pack")
    response: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    spans: list[tuple[int, int]] = []
    for k, turn in enumerate(turns):
        if len(turn.response_logprobs) != len(turn.response_ids):
            raise InvalidArgument(
                f"{label}, turn {k}: {len(turn.response_ids)} response tokens but "
                f"{len(turn.response_logprobs)} logprobs"
            )
        if k > 0:
            response.extend(turn.prompt_ids)
            mask.extend([0] * len(turn.prompt_ids))
            logprobs.extend([0.0] * len(turn.prompt_ids))
        start = len(response)
        response.extend(int(t) for t in turn.response_ids)
        mask.extend([1] * len(turn.response_ids))
        logprobs.extend(float(x) for x in turn.response_logprobs)
        spans.append((start, len(response)))
    rewards = [float(t.reward) for t in turns]
    generated = [e > s for s, e in spans]
    credited, target = credited_rewards(rewards, generated)
    ends = [e for s, e in spans if e > s]
    token_rewards = [0.0] * len(response)
    for j, r in enumerate(credited):
        token_rewards[ends[j] - 1] = r
    for k, (g, t) in enumerate(zip(generated, target, strict=True)):
        if not g:
            where = f"credited to turn {[i for i, x in enumerate(generated) if x][t]}" if t >= 0 else (
                "kept only in reward_score (no turn generated a token)"
            )
            logger.warning("%s: turn %d generated no token; its reward %r is %s", label, k, rewards[k], where)
    return PackedEpisode(
        prompt_ids=[int(t) for t in turns[0].prompt_ids],
        response_ids=response,
        response_mask=mask,
        response_logprobs=logprobs,
        token_rewards=token_rewards,
        reward_score=float(sum(rewards)),
        num_turns=len(turns),
        turn_rewards=rewards,
        turn_spans=spans,
        credited_rewards=credited,
    )


def pack_episode(episode: Episode) -> PackedEpisode:
    """A single-sample episode as one packed row (see the module docs).

    Raises:
        InvalidArgument: the episode has no turn, or several samples (the ``per_turn``
            layout, or a packed episode whose chat template rewrote earlier turns: one
            row cannot hold it; pack each of ``episode.samples()`` with `pack_turns`).
    """
    label = f"episode of {episode.env_id} (seed {episode.seed})"
    samples = episode.samples()
    if len(samples) > 1:
        raise InvalidArgument(
            f"expected one packed sample, got {len(samples)} (layout {episode.layout!r}, "
            f"template_rewrite={episode.template_rewrite}): one row cannot hold the "
            "episode; use Episode.samples() and pack_turns for each"
        )
    if not samples:
        raise InvalidArgument(
            f"{label} has no turn (end_reason {episode.end_reason!r}, error "
            f"{episode.error!r}); the first prompt left no room to generate"
        )
    return pack_turns(samples[0], label=label)


def pad_responses(
    packed: Sequence[PackedEpisode], *, width: int | None = None, pad_token_id: int = 0
) -> dict[str, np.ndarray]:
    """Right-pad the responses of packed rows into ``[batch, width]`` arrays.

    Returns:
        ``response_ids`` (int64, ``pad_token_id`` after each row), ``response_mask``
        (int64), ``token_rewards`` and ``response_logprobs`` (float64), and
        ``lengths`` (``[batch]`` int64).

    Raises:
        InvalidArgument: a row is longer than ``width``.
    """
    longest = max((len(p.response_ids) for p in packed), default=0)
    w = longest if width is None else int(width)
    if longest > w:
        raise InvalidArgument(f"a response has {longest} tokens, more than width={w}")
    n = len(packed)
    out = {
        "response_ids": np.full((n, w), pad_token_id, dtype=np.int64),
        "response_mask": np.zeros((n, w), dtype=np.int64),
        "token_rewards": np.zeros((n, w), dtype=np.float64),
        "response_logprobs": np.zeros((n, w), dtype=np.float64),
        "lengths": np.zeros(n, dtype=np.int64),
    }
    for i, p in enumerate(packed):
        m = len(p.response_ids)
        out["response_ids"][i, :m] = p.response_ids
        out["response_mask"][i, :m] = p.response_mask
        out["token_rewards"][i, :m] = p.token_rewards
        out["response_logprobs"][i, :m] = p.response_logprobs
        out["lengths"][i] = m
    return out


def _bool_mask(mask: Any) -> np.ndarray:
    m = np.asarray(_to_numpy(mask)) != 0
    return m


def turn_spans(mask: Any) -> list[tuple[int, int]] | list[list[tuple[int, int]]]:
    """The turns of packed rows: the maximal runs of ``mask != 0`` as ``[start, end)`` pairs.

    Args:
        mask: one row (1-D) or padded rows (2-D ``[batch, length]``).

    Returns:
        For a 1-D mask, the row's list of pairs; for a 2-D mask, one such list per row
        (an all-zero padding row has none).
    """
    m = _bool_mask(mask)
    if m.ndim == 1:
        return _spans_1d(m)
    if m.ndim != 2:
        raise InvalidArgument(f"mask must be 1-D or 2-D [batch, length], got shape {m.shape}")
    return [_spans_1d(row) for row in m]


def _spans_1d(m: np.ndarray) -> list[tuple[int, int]]:
    edges = np.diff(np.concatenate(([False], m, [False])).astype(np.int8))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def turn_index(mask: Any) -> tuple[np.ndarray, np.ndarray]:
    """Number the turns of padded rows, row by row, left to right.

    Args:
        mask: ``[batch, length]`` response mask (non-zero on generated tokens).

    Returns:
        ``(index, turns_per_row)``: ``index[i, j]`` is the batch-wide number of the turn
        token ``(i, j)`` belongs to, -1 on mask-0 tokens; ``turns_per_row[i]`` the number
        of turns of row ``i``.
    """
    m = _bool_mask(mask)
    if m.ndim != 2:
        raise InvalidArgument(f"response_mask must be 2-D [batch, length], got shape {m.shape}")
    prev = np.zeros_like(m)
    prev[:, 1:] = m[:, :-1]
    starts = m & ~prev
    turns_per_row = starts.sum(axis=1)
    offsets = np.concatenate(([0], np.cumsum(turns_per_row)[:-1])).astype(np.int64)
    index = np.cumsum(starts, axis=1) - 1 + offsets[:, None]
    return np.where(m, index, -1), turns_per_row


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _to_numpy(x: Any) -> Any:
    if _is_torch(x):
        return x.detach().to("cpu").double().numpy() if x.is_floating_point() else x.detach().to("cpu").numpy()
    return x


def _estimate(
    rewards: list[np.ndarray],
    estimator: str,
    gamma: float,
    eps: float | None,
    group_ids: Sequence[Hashable] | None,
    baseline: str,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """`per_turn_advantages` over the non-empty trajectories only (the others get empty arrays)."""
    if estimator not in ESTIMATORS:
        raise InvalidArgument(
            f"unknown estimator {estimator!r}: expected one of {', '.join(ESTIMATORS)}"
        )
    keep = [i for i, r in enumerate(rewards) if r.size]
    groups = None if group_ids is None else [group_ids[i] for i in keep]
    adv, ret = per_turn_advantages(
        [rewards[i] for i in keep], estimator, gamma=gamma, group_ids=groups, eps=eps, baseline=baseline
    )
    out_adv = [np.zeros(0)] * len(rewards)
    out_ret = [np.zeros(0)] * len(rewards)
    for i, a, g in zip(keep, adv, ret, strict=True):
        out_adv[i], out_ret[i] = a, g
    return out_adv, out_ret


def token_advantages(
    token_rewards: Any,
    response_mask: Any,
    *,
    gamma: float,
    estimator: str = "rebn",
    eps: float | None = None,
    group_ids: Sequence[Hashable] | None = None,
    baseline: str = "none",
) -> tuple[Any, Any]:
    """Per-turn advantages of padded packed rows, written on every generated token.

    A turn is a maximal run of ``response_mask != 0`` in a row; its reward is the sum of
    the token rewards inside the run (rewards on mask-0 tokens are ignored); returns
    ``G_t = r_t + gamma * G_{t+1}`` per row; the estimator is
    `gem_core.rl.advantages.per_turn_advantages` over the rows that have a turn.
    Rows without generated tokens (a trainer's padding rows) stay out of every
    statistic; they and all mask-0 tokens get 0.

    Args:
        token_rewards: ``[batch, length]`` per-token rewards (numpy or torch; a 1-D row
            is one row).
        response_mask: same shape, non-zero on generated tokens.
        gamma: discount of the per-turn returns.
        estimator: one of `gem_core.rl.advantages.ESTIMATORS` (``"rebn"``,
            ``"reinforce"``, ``"grpo"``, ``"dr_grpo"``, ``"rloo"``).
        eps: the std offset (default: the estimator's).
        group_ids: one group id per row, for the group estimators.
        baseline: for ``"reinforce"``.

    Returns:
        ``(advantages, returns)`` shaped like ``token_rewards``: float64 numpy arrays, or
        tensors of ``token_rewards``' dtype and device when it is a torch tensor.
        ``returns`` carry each turn's ``G_t`` on its generated tokens.
    """
    like = token_rewards
    rewards = np.asarray(_to_numpy(token_rewards), dtype=np.float64)
    mask = _bool_mask(response_mask)
    if rewards.shape != mask.shape:
        raise InvalidArgument(
            f"token_rewards {tuple(rewards.shape)} and response_mask {tuple(mask.shape)} must "
            "have the same shape [batch, response_length]"
        )
    one_row = rewards.ndim == 1
    if one_row:
        rewards, mask = rewards[None, :], mask[None, :]
    if group_ids is not None and len(group_ids) != rewards.shape[0]:
        raise InvalidArgument(f"group_ids has {len(group_ids)} entries for {rewards.shape[0]} rows")
    index, per_row = turn_index(mask)
    n = int(per_row.sum())
    turn_rewards = np.bincount(index[mask], weights=rewards[mask], minlength=n)
    rows = np.split(turn_rewards, np.cumsum(per_row)[:-1]) if rewards.shape[0] else []
    adv_rows, ret_rows = _estimate(list(rows), estimator, gamma, eps, group_ids, baseline)
    flat_adv = np.concatenate(adv_rows) if n else np.zeros(0)
    flat_ret = np.concatenate(ret_rows) if n else np.zeros(0)
    adv = np.zeros_like(rewards)
    ret = np.zeros_like(rewards)
    adv[mask] = flat_adv[index[mask]]
    ret[mask] = flat_ret[index[mask]]
    if one_row:
        adv, ret = adv[0], ret[0]
    if _is_torch(like):
        import torch

        kw = dict(dtype=like.dtype if like.is_floating_point() else torch.float32, device=like.device)
        return torch.from_numpy(adv).to(**kw), torch.from_numpy(ret).to(**kw)
    return adv, ret


def sample_advantages(
    rewards: Sequence[float] | np.ndarray,
    trajectory_ids: Sequence[Hashable],
    turn_indices: Sequence[int] | np.ndarray,
    *,
    gamma: float,
    estimator: str = "rebn",
    eps: float | None = None,
    group_ids: Sequence[Hashable] | None = None,
    num_tokens: Sequence[int] | np.ndarray | None = None,
    baseline: str = "none",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-turn advantages for trainers that keep one sample per turn (oat, ROLL step managers).

    Samples of one trajectory are ordered by ``turn_indices`` (any order in the input);
    the estimator sees one transition per turn, as `token_advantages` does for packed
    rows. With ``num_tokens``, a sample that generated no token follows the empty-turn
    rule of the module docs: its reward is credited to its trajectory's neighbouring
    generated turn and its own advantage and return are 0.

    Args:
        rewards: one reward per sample.
        trajectory_ids: one trajectory id per sample.
        turn_indices: the turn number of each sample inside its trajectory (distinct
            within a trajectory; gaps are allowed, only the order counts).
        gamma: discount of the per-turn returns.
        estimator: see `token_advantages`.
        eps: the std offset.
        group_ids: one id per sample, constant within a trajectory (group estimators).
        num_tokens: generated tokens per sample (``None``: every sample generated).
        baseline: for ``"reinforce"``.

    Returns:
        ``(advantages, returns)``, float64 arrays aligned with the samples.
    """
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    turns = np.asarray(turn_indices).reshape(-1)
    n = r.size
    if len(trajectory_ids) != n or turns.size != n:
        raise InvalidArgument(
            f"got {n} rewards, {len(trajectory_ids)} trajectory ids and {turns.size} turn indices; "
            "pass one of each per sample"
        )
    gen = np.ones(n, dtype=bool) if num_tokens is None else np.asarray(num_tokens).reshape(-1) > 0
    if gen.size != n:
        raise InvalidArgument(f"num_tokens has {gen.size} entries for {n} samples")
    order: dict[Hashable, list[int]] = {}
    for i, t in enumerate(trajectory_ids):
        order.setdefault(t, []).append(i)
    members = []
    for tid, idx in order.items():
        idx.sort(key=lambda i: int(turns[i]))
        seen = [int(turns[i]) for i in idx]
        if len(set(seen)) != len(seen):
            raise InvalidArgument(f"trajectory {tid!r} has a repeated turn index among {seen}")
        if group_ids is not None and len({group_ids[i] for i in idx}) > 1:
            raise InvalidArgument(f"trajectory {tid!r} has samples in different groups")
        members.append(idx)
    credited = []
    for idx in members:
        c, _ = credited_rewards([r[i] for i in idx], [bool(gen[i]) for i in idx])
        credited.append(np.asarray(c, dtype=np.float64))
    groups = None if group_ids is None else [group_ids[idx[0]] for idx in members]
    adv_rows, ret_rows = _estimate(credited, estimator, gamma, eps, groups, baseline)
    adv = np.zeros(n)
    ret = np.zeros(n)
    for idx, a, g in zip(members, adv_rows, ret_rows, strict=True):
        slots = [i for i in idx if gen[i]]
        adv[slots] = a
        ret[slots] = g
    return adv, ret
