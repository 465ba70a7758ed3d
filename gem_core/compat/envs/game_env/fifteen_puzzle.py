"""Reference ``gem.envs.game_env.fifteen_puzzle``: ``FifteenPuzzleEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["FifteenPuzzleEnv"]

FifteenPuzzleEnv = env_class(
    "FifteenPuzzleEnv",
    __name__,
    "gem_core.envs.games.fifteen_puzzle:FifteenPuzzleEnv",
    ('max_turns', 'num_rows', 'init_algo', 'mc_rand_moves'),
    renames={"mc_rand_moves": "scramble_moves"}, fixed={"init_algo": ("monte_carlo",)},
)
