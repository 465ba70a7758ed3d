"""Reference ``gem.envs.terminal``: the terminal tasks (Docker); see gem_core.envs.terminal."""

from __future__ import annotations
