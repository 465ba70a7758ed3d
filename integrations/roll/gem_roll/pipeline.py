"""``pipeline_cls: gem_roll.pipeline.GemAgenticPipeline``: ROLL's agentic pipeline with exact ReBN.

ROLL's ``agentic_reward_norm`` normalises with the sample std (``ddof=1``) and ``1e-6``:
``step_reinforce`` with ``reward_normalization: {grouping: batch, method: mean_std}`` is
ReBN × sqrt((n-1)/n). `GemAgenticPipeline` runs ROLL's own ``AgenticPipeline.run`` with
that one function replaced, for the run, by `population_std_reward_norm` (population std,
`gem_roll.normalize.DEFAULT_EPS`), so the whole chain — ``compute_discounted_returns``
(per ``traj_id``, by ``step``, with ``step_reward_gamma``), ``compute_response_level_rewards``,
``compute_token_reward``, ``agentic_compute_advantage`` (use ``gamma: 1``) — is ROLL's and
the result is ReBN exactly. Normalisations other than mean and std over the same scope
(batch/batch or group/group) run ROLL's own code.

Any data-parallel size: after the returns are computed, ROLL's ``adjust_batch`` makes the
turn-samples a multiple of what every worker's batch needs (``per_device_train_batch_size ×
gradient_accumulation_steps × dp`` and the inference sizes). Its ``delete`` mode crashes on
ROLL HEAD (a boolean index into a ``BatchProxy``) and drops real samples; ``random_sample``
drops them too; ``copy`` puts duplicated samples into the normalisation. `GemAgenticPipeline`
always pads (ROLL's own ``copy``, so the sizes are ROLL's), marks the padding samples
(``non_tensor_batch["gem_pad"]``), gives them zero loss weight (``response_mask`` 0: ROLL's
token counts and losses skip them) and normalises over the real samples only — whatever
the mode in the config.

Needs ROLL on ``PYTHONPATH``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from roll.pipeline.agentic import utils as _roll_utils
from roll.pipeline.agentic.agentic_pipeline import AgenticPipeline

from gem_core.errors import InvalidArgument
from gem_roll.normalize import DEFAULT_EPS, normalize_returns

__all__ = ["GemAgenticPipeline", "population_std_reward_norm", "exact_reward_norm", "PAD_KEY", "check_roll_hooks", "ROLL_TESTED"]

PAD_KEY = "gem_pad"
"""The ``non_tensor_batch`` key marking the samples `GemAgenticPipeline.adjust_batch` added."""

ROLL_TESTED = "8eb27cc (setup.py roll 0.3.0)"
"""The ROLL commit gem-roll is tested with."""


def check_roll_hooks() -> None:
    """Raise ImportError, naming the change, when a ROLL function gem-roll hooks changed."""
    from gem_core.rl.versions import check_hook

    check_hook("gem-roll", "ROLL", "roll.pipeline.agentic.utils.agentic_reward_norm",
               getattr(_roll_utils, "agentic_reward_norm", None), ("batch", "reward_normalization"), tested=ROLL_TESTED)
    check_hook("gem-roll", "ROLL", "AgenticPipeline.adjust_batch", getattr(AgenticPipeline, "adjust_batch", None),
               ("self", "data", "mode"), tested=ROLL_TESTED)
    check_hook("gem-roll", "ROLL", "AgenticPipeline.run", getattr(AgenticPipeline, "run", None), ("self",),
               tested=ROLL_TESTED)


check_roll_hooks()
_NATIVE = _roll_utils.agentic_reward_norm
_PATCH_LOCK = threading.RLock()


@torch.no_grad()
def population_std_reward_norm(
    batch: Any, reward_normalization: Any, *, eps: float = DEFAULT_EPS, native: Callable[..., Any] = _NATIVE
) -> torch.Tensor:
    """ROLL's ``agentic_reward_norm`` with the population std (same arguments, same result shape).

    Mean and std both over the batch: ReBN (`gem_roll.normalize.normalize_returns`); both
    per group (``grouping: <non_tensor_batch key>``): each group normalised on its own. Any
    other combination (no std, mean only, mixed scopes) is ROLL's ``native`` function.
    """
    mean_type = reward_normalization.norm_mean_type
    std_type = reward_normalization.norm_std_type
    if mean_type != std_type or mean_type not in ("batch", "group"):
        return native(batch, reward_normalization)
    scores = batch.batch["scores"]
    values = scores.detach().to(torch.float64).cpu().numpy().reshape(-1)
    real = np.ones(values.size, dtype=bool)
    if PAD_KEY in batch.non_tensor_batch:  # padding samples: no part in the statistics, value 0
        real = ~np.asarray(batch.non_tensor_batch[PAD_KEY], dtype=bool).reshape(-1)
        if real.size != values.size:
            raise InvalidArgument(
                f"non_tensor_batch[{PAD_KEY!r}] has {real.size} entries for {values.size} scores"
            )
    groups = None
    if mean_type == "group" and reward_normalization.grouping != "batch":
        key = reward_normalization.grouping
        if key not in batch.non_tensor_batch:
            raise InvalidArgument(
                f"reward_normalization.grouping is {key!r}, but the batch has no such key "
                f"(non-tensor keys: {sorted(batch.non_tensor_batch)}); use 'batch' or one of those"
            )
        groups = [str(g) for g, r in zip(np.asarray(batch.non_tensor_batch[key]).reshape(-1), real, strict=True) if r]
    out = np.zeros(values.size)
    if real.any():
        out[real] = normalize_returns(values[real], groups, eps=eps)
    return torch.as_tensor(out.reshape(tuple(scores.shape)), dtype=scores.dtype, device=scores.device)


@contextlib.contextmanager
def exact_reward_norm(eps: float = DEFAULT_EPS) -> Iterator[None]:
    """Within the block, ROLL's agentic reward normalisation uses the population std."""
    with _PATCH_LOCK:
        previous = _roll_utils.agentic_reward_norm
        _roll_utils.agentic_reward_norm = functools.partial(population_std_reward_norm, eps=eps, native=_NATIVE)
        try:
            yield
        finally:
            _roll_utils.agentic_reward_norm = previous


class GemAgenticPipeline(AgenticPipeline):
    """ROLL's ``AgenticPipeline`` whose reward normalisation uses the population std (exact ReBN).

    Attributes:
        eps: the std offset (`gem_roll.normalize.DEFAULT_EPS`, as `gem_core.rl.advantages.rebn`).
    """

    eps: float = DEFAULT_EPS

    def adjust_batch(self, data: Any, mode: str = "copy") -> Any:
        """ROLL's ``adjust_batch`` in ``copy`` mode (ROLL's sizes, whatever ``mode`` says), with
        the added samples marked (``PAD_KEY``) and their ``response_mask`` zeroed: no real
        sample is dropped, and none counts twice in the normalisation or the loss."""
        n = int(data.batch.batch_size[0])
        adjusted = super().adjust_batch(data, mode="copy")
        m = int(adjusted.batch.batch_size[0])
        if m < n:  # pragma: no cover - ROLL's copy mode only appends
            raise InvalidArgument(f"ROLL's adjust_batch(copy) shrank the batch from {n} to {m} samples")
        pad = np.array([i >= n for i in range(m)], dtype=object)  # ROLL: non-tensor data is dtype=object
        adjusted.non_tensor_batch[PAD_KEY] = pad
        if m > n:
            mask = adjusted.batch["response_mask"]
            mask[n:] = 0
            adjusted.batch["response_mask"] = mask
            metrics = adjusted.meta_info.setdefault("metrics", {})
            metrics["system/gem_pad_samples"] = m - n
        return adjusted

    def run(self) -> Any:
        with exact_reward_norm(self.eps):
            return super().run()
