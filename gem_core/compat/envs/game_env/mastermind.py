"""Reference ``gem.envs.game_env.mastermind``: ``MastermindEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["MastermindEnv"]

MastermindEnv = env_class(
    "MastermindEnv",
    __name__,
    "gem_core.envs.games.mastermind:MastermindEnv",
    ('code_length', 'num_numbers', 'duplicate_numbers', 'max_turns'),
)
