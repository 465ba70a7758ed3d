"""Mastermind: peg scoring, the consistent-code oracle, rules, variants and reward accounting."""

from __future__ import annotations

import itertools

import pytest

import gem_core
from gem_core.envs.games.mastermind import RANDOM_CONFIGS, MastermindEnv, oracle, score_guess
from gem_core.envs.games.oracles import play_oracle_episode
from tests.envs.games._fast_path import play_side_by_side

IDS = ["game:Mastermind-v0-easy", "game:Mastermind-v0-hard", "game:Mastermind-v0-random"]


def _naive_score(code, guess):
    black = sum(a == b for a, b in zip(code, guess, strict=True))
    rest_code = [a for a, b in zip(code, guess, strict=True) if a != b]
    white = 0
    for b in (b for a, b in zip(code, guess, strict=True) if a != b):
        if b in rest_code:
            rest_code.remove(b)
            white += 1
    return black, white


def test_score_guess_matches_a_plain_count_with_repeats():
    for code in itertools.product(range(1, 4), repeat=3):
        for guess in itertools.product(range(1, 4), repeat=3):
            assert score_guess(code, guess) == _naive_score(code, guess), (code, guess)
    assert score_guess((1, 2, 3, 4), (1, 3, 2, 2)) == (1, 2)
    assert score_guess((1, 1, 2, 2), (2, 2, 1, 1)) == (0, 4)


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_cracks_every_seed(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        assert success, f"{env_id} seed {seed}: oracle failed in {turns} turns"
        assert turns <= 7
        assert 1.0 <= total <= 1.0 + env.unwrapped.progress_scale


def test_oracle_with_duplicates_allowed():
    env = MastermindEnv(code_length=4, num_numbers=6, duplicate_numbers=True, max_turns=10)
    for seed in range(30):
        env.reset(seed=seed)
        while True:
            _, _, terminated, truncated, info = env.step(oracle(env))
            assert not info["invalid_action"]
            if terminated or truncated:
                break
        assert info["success"], seed


def _progress_sum(env, policy, seed):
    env.reset(seed=seed)
    total = 0.0
    while True:
        _, reward, terminated, truncated, info = env.step(policy(env))
        assert not info["format_error"]
        total += reward
        if terminated or truncated:
            return total - (1.0 if info["success"] else 0.0)


@pytest.mark.parametrize("env_id", IDS)
def test_progress_rewards_stay_within_the_documented_bound(env_id):
    env = gem_core.make(env_id)
    inner = env.unwrapped
    for seed in range(60):
        for policy in (oracle, lambda e: e.sample_random_action()):
            progress = _progress_sum(env, policy, seed)
            bound = inner.progress_scale * (inner.code_length - 1) / inner.code_length
            assert -1e-12 <= progress <= bound + 1e-12, (env_id, seed, progress)


def test_rules_invalid_moves_and_format_errors():
    env = MastermindEnv(code_length=4, num_numbers=6, max_turns=20, format_error="retry")
    env.reset(seed=3)
    env.code = (1, 2, 3, 4)
    obs, reward, terminated, _, info = env.step(r"\boxed{1 2 3}")
    assert info["invalid_action"] and not info["format_error"] and "has 3 digits" in obs
    obs, _, _, _, info = env.step(r"\boxed{1 2 3 9}")
    assert info["invalid_action"] and "outside 1-6" in obs
    obs, reward, _, _, info = env.step(r"\boxed{1, 3, 2, 6}")
    assert not info["invalid_action"] and "1 black peg(s) and 2 white peg(s)" in obs
    assert reward == pytest.approx(0.1 / 4)
    obs, reward, _, _, info = env.step(r"\boxed{1 3 2 6}")
    assert info["invalid_action"] and "already guessed" in obs and reward == 0.0
    obs, reward, _, _, info = env.step(r"\boxed{one two}")
    assert info["format_error"] and reward == pytest.approx(-0.1)
    obs, reward, terminated, _, info = env.step(r"I think \boxed{1234}")  # compact digits
    assert terminated and info["success"] and reward == 1.0
    assert "1 3 2 6 -> 1 black, 2 white" in env.state_summary()


def test_random_variant_draws_every_reference_configuration():
    env = gem_core.make("game:Mastermind-v0-random")
    seen = set()
    for seed in range(40):
        env.reset(seed=seed)
        u = env.unwrapped
        seen.add((u.code_length, u.num_numbers, u.max_turns))
        assert len(set(u.code)) == u.code_length and all(1 <= d <= u.num_numbers for d in u.code)
    assert seen == set(RANDOM_CONFIGS)


def test_same_seed_same_code_and_constructor_errors():
    a, b = MastermindEnv(), MastermindEnv()
    a.reset(seed=11)
    b.reset(seed=11)
    assert a.code == b.code
    with pytest.raises(ValueError, match="num_numbers >= 5"):
        MastermindEnv(code_length=5, num_numbers=4)
    with pytest.raises(ValueError, match="code_length"):
        MastermindEnv(code_length=0)


class _GeneralPath(MastermindEnv):
    """A subclass: `MastermindEnv.step` sends it down LanguageGame.step's general path."""


@pytest.mark.parametrize("variant", [{"code_length": 4, "num_numbers": 6, "max_turns": 20},
                                     {"code_length": 2, "num_numbers": 6, "max_turns": 10},
                                     {"code_length": None, "num_numbers": None, "max_turns": None},
                                     {"code_length": 3, "num_numbers": 4, "duplicate_numbers": True, "max_turns": 8,
                                      "invalid_penalty": -1}])
def test_the_one_frame_common_move_returns_what_the_general_path_returns(variant):
    """The fast `step` against LanguageGame.step, action by action: same observation,
    reward, flags, info and state, on new, repeated, winning, out-of-range and odd guesses."""
    import random

    odd = ["\\boxed{1, 2, 3, 4}", "\\boxed{1234}", "\\boxed{ 1 2 3 4 }", "\\boxed{1  2 3 4}", "\\boxed{1 2 3}",
           "\\boxed{9 9 9 9}", "\\boxed{0 1 2 3}", "\\boxed{}", "\\boxed{a b}", "\\boxed{{1 2 3 4}}", "\\boxed{1 2",
           "\\boxed{\\1 2 3 4}", "no box", "\\boxed{1 2} then \\boxed{3 4}", "x \\boxed{1 2 3 4} \\frac{1}{2}", None, 7]
    rng = random.Random(0)
    fast, general = MastermindEnv(**variant), _GeneralPath(**variant)

    def next_action(env):
        roll = rng.random()
        if roll < 0.1:
            action = rng.choice(odd)
        elif roll < 0.3:  # the oracle's move: episodes get solved
            action = oracle(env)
        elif roll < 0.4:  # repeats and digits out of range
            guess = [rng.randint(1, env.num_numbers + 1) for _ in range(env.code_length)]
            action = f"\\boxed{{{' '.join(map(str, guess))}}}"
        else:
            action = env.sample_random_action()
        return action

    state = lambda env: (env.turn, env.guesses, env._seen, env.best_black, env._history, env.done, env.success)  # noqa: E731
    counts = play_side_by_side(fast, general, range(300), next_action, state)
    assert counts["steps"] > 1000 and counts["valid"] > 500 and counts["solved"] > 50  # every path was exercised
