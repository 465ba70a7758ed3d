"""Word Search: every word hides exactly once, the oracle finds them all, rewards are bounded."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.games.oracles import play_oracle_episode
from gem_core.envs.games.word_search import WordSearchEnv, _occurrences, _segment, oracle

IDS = ["game:WordSearch-v0-easy", "game:WordSearch-v0-hard", "game:WordSearch-v0-random"]
SCALE = 0.1


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_seeds_0_to_199(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        assert success, f"{env_id}: oracle failed on seed {seed}"
        assert turns == env.unwrapped.num_words <= env.unwrapped.max_turns
        assert 1.0 <= total < 1.0 + SCALE + 1e-9


@pytest.mark.parametrize("hardcore", [False, True])
def test_each_word_reads_exactly_once(hardcore):
    env = WordSearchEnv(num_words=6, hardcore=hardcore, max_turns=24)
    backwards = 0
    for seed in range(60):
        env.reset(seed=seed)
        assert len(env.words) == 6
        for word in env.words:
            (r1, c1), (r2, c2) = env.where[word]
            assert _occurrences(env.grid, word) == {_segment((r1, c1), (r2, c2))}
            backwards += r2 < r1 or c2 < c1
    assert (backwards > 0) == hardcore  # only hardcore words read right-to-left / upwards


def test_moves_wrong_invalid_and_format():
    env = gem_core.make("game:WordSearch-v0-easy", format_error="retry")
    env.reset(seed=2)
    game = env.unwrapped
    word = game.words[0]
    (r1, c1), (r2, c2) = game.where[word]
    size = len(game.grid)
    # Either end first; finding a word pays once.
    _, reward, _, _, info = env.step(f"\\boxed{{{r2} {c2} {r1} {c1}}}")
    assert reward == pytest.approx(SCALE / 5) and word in game.found and not info["invalid_action"]
    obs, reward, _, _, info = env.step(f"\\boxed{{{r1} {c1} {r2} {c2}}}")
    assert info["invalid_action"] and reward == 0.0 and "already found" in obs
    # A straight line that is no word: wrong (reward 0), then invalid when repeated.
    blank = next(
        (r, 0, r, 1) for r in range(size) if _segment((r, 0), (r, 1)) not in game._by_segment
    )
    _, reward, _, _, info = env.step("\\boxed{{{} {} {} {}}}".format(*blank))
    assert reward == 0.0 and not info["invalid_action"]
    _, _, _, _, info = env.step("\\boxed{{{} {} {} {}}}".format(*blank))
    assert info["invalid_action"]
    for bad in (f"0 0 {size} 0", "-1 0 0 0", "0 0 2 2"):
        _, reward, _, _, info = env.step(f"\\boxed{{{bad}}}")
        assert info["invalid_action"] and not info["format_error"] and reward == 0.0
    for junk in ("0 0 1", "a b c d", "[0 0 0 0 0]"):
        _, reward, _, _, info = env.step(f"\\boxed{{{junk}}}")
        assert info["format_error"] and reward == pytest.approx(-0.1)
    _, _, _, _, info = env.step("\\boxed{[0, 0, 0, 0]}")
    assert not info["format_error"]


@pytest.mark.parametrize("env_id", IDS)
def test_random_play_progress_rewards_within_bounds(env_id):
    env = gem_core.make(env_id)
    for seed in range(30):
        env.reset(seed=seed)
        progress = 0.0
        while True:
            _, reward, terminated, truncated, info = env.step(env.unwrapped.sample_random_action())
            if not info["success"]:
                progress += reward
                assert reward >= 0.0
            if terminated or truncated:
                break
        assert 0.0 <= progress < SCALE + 1e-9


def test_render_marks_found_words_and_show_words_flag():
    env = WordSearchEnv()
    obs, _ = env.reset(seed=0)
    assert all(w in obs for w in env.words) and "Words found: 0/5" in obs
    obs = env.step(oracle(env))[0]
    assert "[" in obs and "(found)" in obs and "Words found: 1/5" in obs
    hidden = WordSearchEnv(show_words=False)
    obs, _ = hidden.reset(seed=0)
    assert not any(w in obs for w in hidden.words)


def test_random_variant_draws_settings():
    env = WordSearchEnv(num_words=None, hardcore=None, max_turns=None)
    seen = set()
    for seed in range(40):
        env.reset(seed=seed)
        seen.add((env.num_words, env.hardcore))
        assert env.max_turns == 4 * env.num_words and len(env.words) == env.num_words
    assert len(seen) >= 8


def test_move_grammar_is_the_former_regex():
    # The scanner that replaced the backtracking regex accepts exactly the same texts.
    import re

    from tests.envs.games._grammar import DIGITS, SPACES, check_against_regex

    former = re.compile(
        r"\[?\s*(-?\d{1,6})\s*[,\s]\s*(-?\d{1,6})\s*[,\s]\s*(-?\d{1,6})\s*[,\s]\s*(-?\d{1,6})\s*\]?"
    )
    env = gem_core.make("game:WordSearch-v0-easy")
    env.reset(seed=0)
    number = ["1", "-2", "12", "123456", "1234567", "\u0663", "-", "+1", "x"]
    sep = [" ", ",", " , ", "\t", ",,", "", "\u00a0,"]
    check_against_regex(
        env.unwrapped.parse_move,
        former,
        lambda m: tuple(int(g) for g in m.groups()),
        [*SPACES, *DIGITS, "-", "+", ",", "[", "]", "x"],
        [["", " ", "["], ["", " "], number[:5], sep[:5], number, sep, number, sep, number[:6], ["", " ", "\n"],
         ["", "]", " ]", "]]"], ["", " ", "\t"]],
        strip=True,
    )
