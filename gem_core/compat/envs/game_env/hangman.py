"""Reference ``gem.envs.game_env.hangman``: ``HangmanEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["HangmanEnv"]

HangmanEnv = env_class(
    "HangmanEnv",
    __name__,
    "gem_core.envs.games.hangman:HangmanEnv",
    ('word_length', 'hardcore', 'max_turns'),
)
