"""Reference ``gem.envs.game_env.wordle``: ``WordleEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["WordleEnv"]

WordleEnv = env_class(
    "WordleEnv",
    __name__,
    "gem_core.envs.games.wordle:WordleEnv",
    ('word_length', 'only_real_words', 'max_turns'),
)
