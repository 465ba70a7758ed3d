"""Reference ``gem.envs.game_env.minesweeper``: ``MinesweeperEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["MinesweeperEnv"]

MinesweeperEnv = env_class(
    "MinesweeperEnv",
    __name__,
    "gem_core.envs.games.minesweeper:MinesweeperEnv",
    ('rows', 'cols', 'num_mines', 'max_turns'),
)
