"""Reference ``gem.envs.game_env.sudoku``: ``SudokuEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["SudokuEnv"]

SudokuEnv = env_class(
    "SudokuEnv",
    __name__,
    "gem_core.envs.games.sudoku:SudokuEnv",
    ('clues', 'max_turns', 'scale'),
)
