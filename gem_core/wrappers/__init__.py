"""Wrappers: the life-cycle stack `make` applies, episode statistics and history formats."""

from __future__ import annotations

from gem_core.wrappers.common import OrderEnforcing, PassiveEnvChecker, TimeLimit

__all__ = ["OrderEnforcing", "PassiveEnvChecker", "TimeLimit"]
