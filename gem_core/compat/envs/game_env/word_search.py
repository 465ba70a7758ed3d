"""Reference ``gem.envs.game_env.word_search``: ``WordSearchEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["WordSearchEnv"]

WordSearchEnv = env_class(
    "WordSearchEnv",
    __name__,
    "gem_core.envs.games.word_search:WordSearchEnv",
    ('hardcore', 'max_turns', 'num_words'),
)
