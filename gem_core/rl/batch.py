"""Training tensors: episodes plus per-turn advantages become padded per-token arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gem_core.errors import InvalidArgument, import_optional
from gem_core.rl.packing import pack_turns
from gem_core.rl.types import Episode

__all__ = ["TrainingBatch", "build_training_batch"]


@dataclass(slots=True)
class TrainingBatch:
    """Per-token training arrays, one row per sample, right-padded.

    Every ``[i, t]`` entry concerns token ``input_ids[i, t]``. A causal LM's logits at
    position ``t - 1`` predict token ``t``, so compute per-token log-probabilities
    aligned with ``input_ids`` (see `gem_core.rl.policies.sequence_logprobs`, which puts
    0 at position 0) and combine them with the masks below directly.

    Attributes:
        input_ids: ``[N, L]`` int64 token ids (``pad_token_id`` after each sample).
        attention_mask: ``[N, L]`` int64, 1 on real tokens.
        loss_mask: ``[N, L]`` float32, 1 on generated tokens, 0 on prompt, env and
            template tokens and padding.
        advantages: ``[N, L]`` float32, the turn's advantage on each of its generated
            tokens, 0 elsewhere.
        old_logprobs: ``[N, L]`` float32, the sampling log-probability of each generated
            token, 0 elsewhere.
        episode_index: ``[N]`` int64, the index (in the episodes given) of each row's
            episode.
        lengths: ``[N]`` int64, the unpadded length of each row.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    loss_mask: np.ndarray
    advantages: np.ndarray
    old_logprobs: np.ndarray
    episode_index: np.ndarray
    lengths: np.ndarray

    @property
    def num_samples(self) -> int:
        """The number of rows."""
        return int(self.input_ids.shape[0])

    @property
    def num_loss_tokens(self) -> int:
        """The number of generated (trained-on) tokens."""
        return int(self.loss_mask.sum())

    def select(self, rows: Sequence[int] | np.ndarray) -> TrainingBatch:
        """The rows ``rows`` (e.g. a minibatch), trimmed to their longest length."""
        idx = np.asarray(rows, dtype=np.int64)
        width = int(self.lengths[idx].max()) if idx.size else 0
        return TrainingBatch(
            input_ids=self.input_ids[idx, :width],
            attention_mask=self.attention_mask[idx, :width],
            loss_mask=self.loss_mask[idx, :width],
            advantages=self.advantages[idx, :width],
            old_logprobs=self.old_logprobs[idx, :width],
            episode_index=self.episode_index[idx],
            lengths=self.lengths[idx],
        )

    def to_torch(self, device: Any = "cpu") -> dict[str, Any]:
        """The arrays as torch tensors on ``device`` (a dict keyed by field name)."""
        torch = import_optional("torch", extra="rl", purpose="TrainingBatch.to_torch")
        return {
            name: torch.from_numpy(np.ascontiguousarray(getattr(self, name))).to(device)
            for name in self.__slots__
        }


def build_training_batch(
    episodes: Sequence[Episode],
    advantages: Sequence[Sequence[float] | np.ndarray],
    *,
    pad_token_id: int = 0,
) -> TrainingBatch:
    """Turn episodes and their per-turn advantages into per-token arrays.

    Each sample of each episode (`Episode.samples`: one per packed episode, one per
    turn in the per-turn layout) becomes one row: its packed sequence
    (`gem_core.rl.packing.pack_turns`). Generated tokens get ``loss_mask`` 1, their
    turn's advantage and their sampling log-probability; all other tokens get 0.

    Args:
        episodes: the episodes to train on (drop errored ones first if you wish).
        advantages: one array per episode, aligned with its turns (as returned by
            `gem_core.rl.advantages.compute_advantages`).
        pad_token_id: the id written after each row's end.

    Returns:
        A `TrainingBatch` (zero rows when no episode has a turn).
    """
    if len(advantages) != len(episodes):
        raise InvalidArgument(
            f"got {len(advantages)} advantage arrays for {len(episodes)} episodes"
        )
    rows: list[tuple[int, list[int], list[float], np.ndarray, list[float]]] = []
    for i, (ep, adv) in enumerate(zip(episodes, advantages, strict=True)):
        adv = np.asarray(adv, dtype=np.float64).reshape(-1)
        if adv.size != ep.num_turns:
            raise InvalidArgument(
                f"episode {i} has {ep.num_turns} turns but {adv.size} advantages; pass one "
                "advantage per turn"
            )
        k = 0
        for sample in ep.samples():
            packed = pack_turns(sample, label=f"episode {i}")
            n_p = len(packed.prompt_ids)
            a = np.zeros(n_p + len(packed.response_ids))
            for s, e in packed.turn_spans:
                a[n_p + s : n_p + e] = adv[k]
                k += 1
            lp = [0.0] * n_p + packed.response_logprobs
            rows.append((i, packed.token_ids, packed.loss_mask, a, lp))
    n = len(rows)
    width = max((len(r[1]) for r in rows), default=0)
    input_ids = np.full((n, width), pad_token_id, dtype=np.int64)
    attention = np.zeros((n, width), dtype=np.int64)
    loss_mask = np.zeros((n, width), dtype=np.float32)
    adv_arr = np.zeros((n, width), dtype=np.float32)
    old_lp = np.zeros((n, width), dtype=np.float32)
    lengths = np.zeros(n, dtype=np.int64)
    episode_index = np.zeros(n, dtype=np.int64)
    for r, (i, ids, mask, a, lp) in enumerate(rows):
        m = len(ids)
        input_ids[r, :m] = ids
        attention[r, :m] = 1
        loss_mask[r, :m] = mask
        adv_arr[r, :m] = a
        old_lp[r, :m] = lp
        lengths[r] = m
        episode_index[r] = i
    return TrainingBatch(input_ids, attention, loss_mask, adv_arr, old_lp, episode_index, lengths)
