"""Reference ``gem.envs.game_env.game_2048``: ``Game2048Env`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["Game2048Env"]

Game2048Env = env_class(
    "Game2048Env",
    __name__,
    "gem_core.envs.games.game_2048:Game2048Env",
    ('target_tile', 'max_turns', 'board_size'),
)
