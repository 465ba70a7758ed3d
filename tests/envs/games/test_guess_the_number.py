"""Guess The Number: binary-search oracle bound, hints, invalid moves and reward accounting."""

from __future__ import annotations

import math

import pytest

import gem_core
from gem_core.envs.games.guess_the_number import GuessTheNumberEnv
from gem_core.envs.games.oracles import play_oracle_episode
from tests.envs.games._fast_path import play_side_by_side

IDS = ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0-hard", "game:GuessTheNumber-v0-random"]


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_always_wins_within_the_binary_search_bound(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        game = env.unwrapped
        size = game.max_number - game.min_number + 1
        assert success, f"{env_id} seed {seed}: oracle failed"
        assert turns <= math.ceil(math.log2(size)) + 1, f"{env_id} seed {seed}: {turns} guesses"
        # Winning pays 1.0; the progress rewards add at most progress_scale.
        assert 1.0 <= total <= 1.0 + game.progress_scale + 1e-9


def test_hints_invalid_moves_and_progress_rewards():
    env = GuessTheNumberEnv(min_number=1, max_number=100, max_turns=20)
    env.reset(seed=0)
    env.target = 30
    obs, reward, terminated, _, info = env.step(r"I think \boxed{50}")
    assert "lower than 50" in obs and not terminated
    assert reward == pytest.approx(0.1 * 51 / 100)  # 50..100 ruled out
    assert info["parsed_action"] == "50" and not info["invalid_action"]
    # A repeated guess and an out-of-range guess are invalid moves: no state change, no reward.
    for action, text in ((r"\boxed{50}", "already guessed"), (r"\boxed{101}", "outside the range")):
        obs, reward, terminated, _, info = env.step(action)
        assert text in obs and reward == 0.0 and info["invalid_action"] and not info["format_error"]
    assert (env.low, env.high) == (1, 49)
    # A box that is not a number is a format error, not an invalid move.
    env2 = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=5, format_error="retry")
    env2.reset(seed=0)
    _, reward, terminated, _, info = env2.step(r"\boxed{five}")
    assert info["format_error"] and reward == pytest.approx(-0.1) and not terminated
    # Guessing the target wins with reward 1 and success on the final step.
    obs, reward, terminated, truncated, info = env.step(r"\boxed{30}")
    assert reward == 1.0 and terminated and not truncated and info["success"] is True
    assert "30 (correct)" in env.state_summary()


def test_turn_budget_truncates_and_the_text_states_it():
    env = gem_core.make("game:GuessTheNumber-v0-easy")
    obs, _ = env.reset(seed=5)
    assert "within 4 turns" in obs
    target = env.unwrapped.target
    wrong = [n for n in range(1, 11) if n != target][:4]
    for n in wrong:
        _, _, terminated, truncated, info = env.step(rf"\boxed{{{n}}}")
    assert truncated and not terminated and info["success"] is False and info["turn"] == 4
    # make(max_turns=...) changes both the env's own budget (and its text) and the TimeLimit.
    env = gem_core.make("game:GuessTheNumber-v0-easy", max_turns=6)
    obs, _ = env.reset(seed=5)
    assert "within 6 turns" in obs and env.unwrapped.max_turns == 6


def test_random_variant_draws_its_range_from_the_seed():
    env = gem_core.make("game:GuessTheNumber-v0-random")
    ranges = set()
    for seed in range(30):
        env.reset(seed=seed)
        game = env.unwrapped
        assert 1 <= game.min_number <= 10 and game.min_number + 5 <= game.max_number <= game.min_number + 50
        assert game.max_turns == math.ceil(math.log2(game.max_number - game.min_number + 1)) + 2
        ranges.add((game.min_number, game.max_number))
    assert len(ranges) > 10
    env.reset(seed=7)
    first = (env.unwrapped.min_number, env.unwrapped.max_number, env.unwrapped.target)
    env.reset(seed=7)
    assert (env.unwrapped.min_number, env.unwrapped.max_number, env.unwrapped.target) == first


def test_bad_constructor_arguments_are_named():
    # A gem_core error from the constructor passes through make() with a note naming the id.
    with pytest.raises(gem_core.errors.InvalidArgument, match="min_number") as caught:
        gem_core.make("game:GuessTheNumber-v0-easy", min_number=10, max_number=3)
    assert "while making env 'game:GuessTheNumber-v0-easy'" in " ".join(getattr(caught.value, "__notes__", []))


def test_observation_is_the_feedback_then_the_view_render_shows():
    # observe() builds the text in one go; it must equal the base's feedback + render().
    env = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=6)
    env.reset(seed=0)
    env.target = 7
    for guess, feedback in [
        (99, "Turn 1: 99 is outside the range 1-10."),
        (3, "Turn 2: you guessed 3; the target is higher than 3."),
        (3, "Turn 3: you already guessed 3."),
        (9, "Turn 4: you guessed 9; the target is lower than 9."),
    ]:
        obs = env.step(f"\\boxed{{{guess}}}")[0]
        assert obs == f"{feedback}\n\n{env.render()}"
    assert env.render() == "Guesses so far: 3 (higher), 9 (lower). Enter your next guess."
    env.reset(seed=0)
    assert env.step(r"\boxed{0}")[0].endswith("\n\nNo guesses yet. Enter your first guess.")


class _GeneralPath(GuessTheNumberEnv):
    """A subclass: `GuessTheNumberEnv.step` sends it down LanguageGame.step's general path."""


@pytest.mark.parametrize("variant", [{"min_number": 1, "max_number": 10, "max_turns": 4},
                                     {"min_number": 1, "max_number": 50, "max_turns": 7},
                                     {"min_number": None, "max_number": None, "max_turns": None},
                                     {"min_number": 1, "max_number": 2000, "max_turns": 12}])
def test_the_one_frame_common_move_returns_what_the_general_path_returns(variant):
    """The fast `step` against LanguageGame.step, action by action: same observation,
    reward, flags, info and state, on ordinary guesses and on every odd box content."""
    import random

    odd = ["\\boxed{ 7 }", "\\boxed{07}", "\\boxed{+7}", "\\boxed{-3}", "\\boxed{7.5}", "\\boxed{}",
           "\\boxed{1_0}", "\\boxed{\u0663}", "\\boxed{\\boxed{3}}", "\\boxed{{3}}", "\\boxed{3",
           "no box", "\\boxed{3} then \\boxed{4}", "\\boxed{" + "9" * 31 + "}",
           "\\boxed{" + " " * 40 + "5}", "\\boxed{1023}", "\\boxed{1024}", "\\boxed{0}",
           "x \\boxed{5} \\frac{1}{2}", None, 7]
    rng = random.Random(0)
    fast, general = GuessTheNumberEnv(**variant), _GeneralPath(**variant)

    def next_action(env):
        roll = rng.random()
        if roll < 0.15:
            action = rng.choice(odd)
        elif roll < 0.25:
            action = f"\\boxed{{{rng.randint(-5, 2100)}}}"
        else:
            action = f"I guess \\boxed{{{rng.randint(env.min_number, env.max_number)}}}"
        return action

    state = lambda env: (env.turn, env.low, env.high, env.guesses, env.done, env.success)  # noqa: E731
    counts = play_side_by_side(fast, general, range(200), next_action, state)
    assert counts["steps"] > 300 and counts["valid"] > 100  # the fast path was exercised, not only the fallbacks


def test_a_subclass_takes_the_general_path_even_with_a_step_of_its_own():
    class Doubled(GuessTheNumberEnv):  # changes what a move means and wraps step
        def parse_move(self, content):
            return 2 * int(content)

        def step(self, action):
            return super().step(action)

    assert GuessTheNumberEnv._fast_step and not Doubled._fast_step and not _GeneralPath._fast_step
    env = Doubled(min_number=1, max_number=10, max_turns=4)
    env.reset(seed=0)
    assert "you guessed 6" in env.step("\\boxed{3}")[0] or env.target == 6
