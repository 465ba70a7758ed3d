"""Reference ``gem.envs.game_env.guess_the_number``: ``GuessTheNumberEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["GuessTheNumberEnv"]

GuessTheNumberEnv = env_class(
    "GuessTheNumberEnv",
    __name__,
    "gem_core.envs.games.guess_the_number:GuessTheNumberEnv",
    ('min_number', 'max_number', 'max_turns'),
)
