"""Reference ``gem.envs.game_env.crosswords.crosswords``: ``CrosswordsEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["CrosswordsEnv"]

CrosswordsEnv = env_class(
    "CrosswordsEnv",
    __name__,
    "gem_core.envs.games.crosswords:CrosswordsEnv",
    ('hardcore', 'max_turns', 'num_words'),
)
