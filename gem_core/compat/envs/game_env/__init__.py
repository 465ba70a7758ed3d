"""Reference ``gem.envs.game_env``: the games, one module each, on gem_core's games."""

from __future__ import annotations
