"""Reference ``gem.envs.game_env.sokoban.sokoban``: ``SokobanEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["SokobanEnv", "CHANGE_COORDINATES"]

SokobanEnv = env_class(
    "SokobanEnv",
    __name__,
    "gem_core.envs.games.sokoban:SokobanEnv",
    ('dim_room', 'max_turns', 'num_boxes'),
)

# The reference's action number -> (row, column) offset: 0 up, 1 down, 2 left, 3 right.
CHANGE_COORDINATES = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}
