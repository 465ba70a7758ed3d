"""Wordle: feedback with repeated letters, the word lists, the filtering oracle, rules and rewards."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.games import words
from gem_core.envs.games.oracles import play_oracle_episode
from gem_core.envs.games.wordle import WordleEnv, oracle, score_word

IDS = ["game:Wordle-v0-easy", "game:Wordle-v0-hard", "game:Wordle-v0-random"]


@pytest.mark.parametrize(
    "secret,guess,feedback",
    [
        ("CRANE", "CRANE", "GGGGG"),
        ("CRANE", "NACRE", "YYYYG"),
        ("ABBEY", "BABES", "YYGGX"),
        ("ABBEY", "KEBAB", "XYGYY"),
        ("ABBEY", "BOBBY", "YXGXG"),  # third B: both B's of the secret already used
        ("SPEED", "EERIE", "YYXXX"),  # two E's in the secret: only two E's score
        ("SPEED", "ERASE", "YXXYY"),
        ("ROBOT", "FLOOR", "XXYGY"),  # green O first, then one yellow O
        ("LEVEL", "LLAMA", "GYXXX"),
        ("AAB", "ABA", "GYY"),
        ("ABA", "AAA", "GXG"),
    ],
)
def test_score_word_repeated_letters(secret, guess, feedback):
    assert score_word(secret, guess) == feedback


def test_word_lists_ship_and_cover_the_variant_lengths():
    for n in (3, 4, 5):
        answers = words.words("common", n)
        assert len(answers) >= 300 and all(len(w) == n and w.isalpha() and w.isupper() for w in answers)
        assert list(answers) == sorted(set(answers))
        assert len(words.words("web2", n)) > len(answers)
    assert words.lengths("web2") == (3, 4, 5, 6, 7)
    assert words.words("common", 99) == ()
    with pytest.raises(ValueError, match="unknown word list"):
        words.words("nope", 3)


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_finds_every_seed(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        assert success, f"{env_id} seed {seed}: oracle failed"
        assert turns <= 11
        assert 1.0 <= total < 1.0 + env.unwrapped.progress_scale


@pytest.mark.parametrize("env_id", IDS)
def test_progress_rewards_stay_within_the_documented_bound(env_id):
    env = gem_core.make(env_id)
    inner = env.unwrapped
    for seed in range(40):
        for policy in (oracle, lambda e: e.sample_random_action()):
            env.reset(seed=seed)
            total = 0.0
            while True:
                _, reward, terminated, truncated, info = env.step(policy(env))
                assert not info["format_error"]
                total += reward
                if terminated or truncated:
                    break
            progress = total - (1.0 if info["success"] else 0.0)
            bound = inner.progress_scale
            if info["success"]:  # the winning guess turns the last greens: it pays 1.0 only
                bound *= (inner.word_length - 1) / inner.word_length
            assert -1e-12 <= progress <= bound + 1e-12


def test_rules_invalid_moves_and_format_errors():
    env = WordleEnv(word_length=5, max_turns=25, format_error="retry")
    env.reset(seed=0)
    env.secret = "CRANE"
    obs, reward, _, _, info = env.step(r"\boxed{CAT}")
    assert info["invalid_action"] and not info["format_error"] and "has 3 letters" in obs
    obs, _, _, _, info = env.step(r"\boxed{ZZZZZ}")
    assert info["invalid_action"] and "not in the word list" in obs
    obs, reward, _, _, info = env.step(r"\boxed{c r a t e}")
    assert not info["invalid_action"] and "GGGXG" in obs and reward == pytest.approx(0.1 * 4 / 5)
    obs, _, _, _, info = env.step(r"\boxed{crate}")
    assert info["invalid_action"] and "already guessed" in obs
    obs, reward, _, _, info = env.step(r"\boxed{CR4NE}")
    assert info["format_error"] and reward == pytest.approx(-0.1)
    assert "C R A T E" in env.state_summary()
    obs, reward, terminated, _, info = env.step(r"\boxed{CRANE}")
    assert terminated and info["success"] and reward == 1.0


def test_any_letters_accepted_without_only_real_words():
    env = WordleEnv(word_length=3, only_real_words=False, max_turns=15)
    env.reset(seed=1)
    _, _, _, _, info = env.step(r"\boxed{QXZ}")
    assert not info["invalid_action"]


def test_random_variant_lengths_and_budget():
    env = gem_core.make("game:Wordle-v0-random")
    seen = set()
    for seed in range(30):
        env.reset(seed=seed)
        u = env.unwrapped
        seen.add(u.word_length)
        assert u.max_turns == 5 * u.word_length and u.secret in u.answers
    assert seen == {3, 4, 5}


def test_constructor_rejects_lengths_without_words():
    with pytest.raises(ValueError, match="word_length must be one of"):
        WordleEnv(word_length=2)
