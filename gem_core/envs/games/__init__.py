"""Multi-turn language games: one module per game on the shared `LanguageGame` base."""

from __future__ import annotations

from gem_core.envs.games.base import LanguageGame, MoveResult, extract_last_boxed

__all__ = ["LanguageGame", "MoveResult", "extract_last_boxed"]
