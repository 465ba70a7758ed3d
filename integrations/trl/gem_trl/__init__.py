"""gem-trl: GEM environments and ReBN inside TRL's ``GRPOTrainer``.

- `gem_trl.rollout.GemRollout`: TRL's ``rollout_func``: one gem_core episode per
  dataset row (``env_id``/``seed`` columns), played through the adapter kit of
  `gem_core.rl` and packed into one completion (``env_mask`` 0 on env tokens), with the
  per-turn rewards as extra fields;
- `gem_trl.trainer.GemGRPOTrainer` and `gem_trl.trainer.GemGRPOConfig`: a
  ``GRPOTrainer`` whose advantages are per-token ReBN over the per-turn rewards
  (``gamma`` is a config field), with the reward function (the episode return) and the
  rollout function supplied;
- `gem_trl.data.make_dataset`: the rows TRL's dataloader hands out.

Importing ``gem_trl`` itself imports neither TRL nor torch: the names above load them
on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from gem_trl._version import TRL_BELOW, TRL_MIN, check_trl_version

__all__ = [
    "__version__",
    "TRL_MIN",
    "TRL_BELOW",
    "check_trl_version",
    "GemRollout",
    "GemGRPOConfig",
    "GemGRPOTrainer",
    "gem_episode_return",
    "make_dataset",
]

__version__ = "0.1.0"

_LAZY = {
    "GemRollout": "gem_trl.rollout",
    "GemGRPOConfig": "gem_trl.trainer",
    "GemGRPOTrainer": "gem_trl.trainer",
    "gem_episode_return": "gem_trl.trainer",
    "make_dataset": "gem_trl.data",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gem_trl' has no attribute {name!r}")
