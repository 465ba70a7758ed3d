"""gem-oat: GEM environments and per-turn ReBN in oat (oat-llm 0.2.4).

- `gem_oat.args.GemArgs`: oat's ``PPOArgs`` plus the env settings (env ids, mixture
  weights, env kwargs, wrappers, turn and token budgets), with defaults for ReBN through
  oat's own learner (``--gamma``, ``--whiten_adv``, no critic, ``--beta 0``);
  `gem_oat.args.validate_args` checks them (and makes every env once) before any GPU work;
- `gem_oat.actor.GemActor`: a ``PPOMultiTurnActor`` whose ``collect_experience`` plays
  gem_core episodes with oat's vLLM engine and returns one oat ``Transition`` per
  generated turn;
- `gem_oat.learner.GemLearner`: oat's ``PPOMultiTurnLearner`` keeping every transition of
  a step (oat subsamples them before whitening) and a placeholder prompt dataset.

Importing ``gem_oat`` itself imports neither oat nor torch: the names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from gem_oat._version import OAT_TESTED, check_oat_version

__all__ = [
    "__version__",
    "OAT_TESTED",
    "check_oat_version",
    "GemArgs",
    "validate_args",
    "GemActor",
    "GemLearner",
]

__version__ = "0.1.0"

_LAZY = {
    "GemArgs": "gem_oat.args",
    "validate_args": "gem_oat.args",
    "GemActor": "gem_oat.actor",
    "GemLearner": "gem_oat.learner",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gem_oat' has no attribute {name!r}")
