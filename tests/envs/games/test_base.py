"""Tests for gem_core.envs.games.base: the step flow every game shares."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core.envs.games import words
from gem_core.envs.games.base import MAX_BOX_CHARS, LanguageGame, MoveResult
from gem_core.envs.games.guess_the_number import GuessTheNumberEnv
from gem_core.envs.games.sudoku import SudokuEnv
from gem_core.envs.games.tower_of_hanoi import TowerofHanoiEnv
from gem_core.errors import InvalidArgument
from gem_core.grading.extract import extract_boxed


class _EchoGame(LanguageGame):
    """Every box content is a move; ``"win"`` wins, ``"bad"`` is invalid, the rest are plain moves."""

    title = "Echo"

    def __init__(self, *, shorthand: bool = False, reward: float = 0.25, **kwargs):
        super().__init__(max_turns=3, format_error="retry", **kwargs)
        self.shorthand = shorthand
        self.reward = reward

    def new_game(self) -> None:
        self.moves: list[str] = []

    def instructions(self) -> str:
        return "Echo anything."

    def render(self) -> str:
        return f"Moves: {self.moves}"

    def parse_move(self, content: str) -> str:
        return content

    def apply_move(self, move: str):
        if move == "win":
            return MoveResult("won", 1.0, terminated=True, success=True)
        if move == "bad":
            return MoveResult("invalid", -0.5, invalid=True)
        self.moves.append(move)
        feedback = f"you said {move}"
        return (feedback, self.reward) if self.shorthand else MoveResult(feedback, self.reward)


def _episode(env: LanguageGame, actions: list[str]) -> list[tuple]:
    out = [env.reset(seed=0)]
    for action in actions:
        out.append(env.step(action))
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.mark.parametrize("reward", [0.25, 2], ids=["float", "int"])
@pytest.mark.parametrize(
    "actions",
    [[r"\boxed{a}", r"\boxed{b}", r"\boxed{c}"], [r"\boxed{a}", r"\boxed{bad}", r"\boxed{win}"]],
    ids=["truncated", "invalid-then-won"],
)
def test_apply_move_may_return_feedback_and_reward_as_a_pair(actions, reward):
    pair = _episode(_EchoGame(shorthand=True, reward=reward), actions)
    full = _episode(_EchoGame(shorthand=False, reward=reward), actions)
    assert pair == full
    assert all(type(step[1]) is float for step in pair[1:]), "rewards must be Python floats"
    obs, got, terminated, truncated, info = pair[1]
    assert (obs, got, terminated, truncated) == ("you said a\n\nMoves: ['a']", float(reward), False, False)
    assert info == {
        "success": False, "turn": 1, "format_error": False, "invalid_action": False, "parsed_action": "a",
    }


_PIECES = st.sampled_from(["\\boxed{", "\\fbox{", "\\boxed ", "{", "}", "\\", "x", "7", " ", "$"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_step_reads_the_box_extract_boxed_reads(text):
    env = _EchoGame()
    env.reset(seed=0)
    _, _, _, _, info = env.step(text)
    expected = extract_boxed(text, None)
    if expected is None or len(expected) > MAX_BOX_CHARS:
        assert info["format_error"] is True
    else:
        assert (info["format_error"], info["parsed_action"]) == (False, expected)


def test_step_reports_a_non_text_action_as_a_format_error():
    env = _EchoGame()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(12)
    assert info["format_error"] is True and (reward, terminated, truncated) == (-0.1, False, False)
    assert obs.startswith("Format error at turn 1: the action must be text, got int.")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: GuessTheNumberEnv(format_error="crash"),
            re.escape("format_error must be one of ('terminate', 'retry'), got 'crash'"),
        ),
        (lambda: GuessTheNumberEnv(max_turns=0), "max_turns must be a positive int or None, got 0"),
        (lambda: GuessTheNumberEnv(min_number=5, max_number=5), "need integers min_number < max_number, got 5, 5"),
        (lambda: TowerofHanoiEnv(num_disks=0), r"num_disks must be an int in \[1, 20\] or None, got 0"),
        (lambda: SudokuEnv(scale=5), "scale must be 4, 9 or None, got 5"),
        (lambda: words.words("klingon", 5), "unknown word list 'klingon'; expected one of"),
    ],
    ids=["format_error", "max_turns", "range", "num_disks", "scale", "word-list"],
)
def test_bad_game_settings_raise_invalid_argument(build, message):
    with pytest.raises(InvalidArgument, match=message) as caught:
        build()
    assert isinstance(caught.value, ValueError), "callers catching ValueError must keep working"
