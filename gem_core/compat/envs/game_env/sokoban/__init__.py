"""Reference ``gem.envs.game_env.sokoban``."""

from __future__ import annotations

from gem_core.compat.envs.game_env.sokoban.sokoban import SokobanEnv

__all__ = ["SokobanEnv"]
