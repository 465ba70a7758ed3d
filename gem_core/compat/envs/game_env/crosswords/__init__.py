"""Reference ``gem.envs.game_env.crosswords``."""

from __future__ import annotations

from gem_core.compat.envs.game_env.crosswords.crosswords import CrosswordsEnv

__all__ = ["CrosswordsEnv"]
