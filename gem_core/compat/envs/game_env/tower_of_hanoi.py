"""Reference ``gem.envs.game_env.tower_of_hanoi``: ``TowerofHanoiEnv`` on gem_core's game (`gem_core.compat.envs._ported`)."""

from __future__ import annotations

from gem_core.compat.envs._ported import env_class

__all__ = ["TowerofHanoiEnv"]

TowerofHanoiEnv = env_class(
    "TowerofHanoiEnv",
    __name__,
    "gem_core.envs.games.tower_of_hanoi:TowerofHanoiEnv",
    ('num_disks', 'max_turns'),
)
