"""Wrappers: the life-cycle stack `make` applies, episode statistics, history formats, tools.

`ToolEnvWrapper` (from `gem_core.tools.wrapper`) loads on first access, so importing this
package imports no tool and no sandbox.
"""

from __future__ import annotations

import importlib
from typing import Any

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

_LAZY = {"ToolEnvWrapper": "gem_core.tools.wrapper"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gem_core.wrappers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
