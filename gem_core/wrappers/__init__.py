"""Wrappers: the life-cycle stack `make` applies, episode statistics and history formats."""

from __future__ import annotations

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
]
