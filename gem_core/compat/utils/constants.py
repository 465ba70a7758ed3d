"""Reference-GEM constants (``gem.utils.constants``): `TERMINAL_STATE`, `LanguageGameReward`."""

from __future__ import annotations

from gem_core.compat._not_ported import missing_values

__all__ = ["TERMINAL_STATE", "LanguageGameReward"]

__getattr__ = missing_values(
    __name__,
    ("BASE_IMPORTS", "BASE_LEETCODE_IMPORTS"),
    instead="gem_core.grading.code.grade_program (programs run as given, in the sandbox)",
    why="import preambles the reference prepends to graded programs",
)

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
