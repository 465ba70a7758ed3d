"""Reference-GEM constants (``gem.utils.constants``): `TERMINAL_STATE`, `LanguageGameReward`."""

from __future__ import annotations

__all__ = ["TERMINAL_STATE", "LanguageGameReward"]

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"
"""The final observation of the reference's single-turn envs. gem_core's envs end with
text instead ("Correct.", "Incorrect.", ...); user envs may still return this sentinel."""


class LanguageGameReward:
    """The reference's default game rewards (class attributes). gem_core's games use dense
    progress rewards instead (see gem_core/envs/games/README.md)."""

    success_reward: float = 1.0
    internal_step_reward: float = 0.0
    fail_reward: float = 0.0
    invalid_action_reward: float = 0.0
    format_error_reward: float = -0.1
