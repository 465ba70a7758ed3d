"""Wrappers: the life-cycle stack `make` applies, episode statistics, history formats, tools.

`ToolEnvWrapper` (from `gem_core.tools.wrapper`) loads on first access, so importing this
package imports no tool and no sandbox.
"""

from __future__ import annotations

from gem_core import _lazy
from gem_core.core import find_layer, iter_layers
from gem_core.wrappers.common import OrderEnforcing, PassiveEnvChecker, TimeLimit
from gem_core.wrappers.history import HISTORY_FORMATS, HistoryWrapper
from gem_core.wrappers.stats import EpisodeStats

__all__ = [
    "OrderEnforcing",
    "PassiveEnvChecker",
    "TimeLimit",
    "EpisodeStats",
    "HistoryWrapper",
    "HISTORY_FORMATS",
    "ToolEnvWrapper",
    "iter_layers",
    "find_layer",
]

__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__,
    {"ToolEnvWrapper": "gem_core.tools.wrapper"},
)
