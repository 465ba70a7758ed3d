"""Crosswords: valid connected layouts, the oracle fills every grid, rewards are bounded."""

from __future__ import annotations

import random
import re

import pytest

import gem_core
from gem_core.envs.games.crosswords import CrosswordsEnv, build_layout, load_clues, oracle
from gem_core.envs.games.oracles import play_oracle_episode

IDS = ["game:Crosswords-v0-easy", "game:Crosswords-v0-hard", "game:Crosswords-v0-random"]
SCALE = 0.1


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_seeds_0_to_199(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        assert success, f"{env_id}: oracle failed on seed {seed}"
        assert turns == env.unwrapped._total <= env.unwrapped.max_turns
        assert 1.0 <= total < 1.0 + SCALE + 1e-9


def _runs(grid):
    """Maximal runs of 2+ letters: {(row, col, direction): word}."""
    out = {}
    rows, cols = len(grid), len(grid[0])
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] is None:
                continue
            for d, (dr, dc) in (("across", (0, 1)), ("down", (1, 0))):
                pr, pc = r - dr, c - dc
                if 0 <= pr < rows and 0 <= pc < cols and grid[pr][pc] is not None:
                    continue
                word = ""
                rr, cc = r, c
                while rr < rows and cc < cols and grid[rr][cc] is not None:
                    word += grid[rr][cc]
                    rr, cc = rr + dr, cc + dc
                if len(word) > 1:
                    out[(r, c, d)] = word
    return out


@pytest.mark.parametrize("level", ["easy", "hard"])
def test_layouts_are_valid_crosswords(level):
    pairs = load_clues(level)
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(2, 5)
        layout = build_layout(rng, pairs, n, max_cells=40)
        grid = layout.grid
        assert len(layout.words) == n and len(layout.letter_cells()) <= 40
        # Letters agree: every word reads from the grid; every run of letters is a word.
        assert _runs(grid) == {(w.row, w.col, w.direction): w.word for w in layout.words}
        # Connected: the words form one component through shared cells.
        cells = [set(w.cells()) for w in layout.words]
        seen, frontier = {0}, [0]
        while frontier:
            i = frontier.pop()
            for j in range(n):
                if j not in seen and cells[i] & cells[j]:
                    seen.add(j)
                    frontier.append(j)
        assert len(seen) == n
        # Numbering: in reading order of start cells, starting at 1.
        starts = sorted({(w.row, w.col) for w in layout.words})
        for w in layout.words:
            assert w.number == starts.index((w.row, w.col)) + 1
        # Clue texts exist and no two answers repeat.
        assert len({w.word for w in layout.words}) == n and all(w.clue for w in layout.words)


def test_word_list_is_clean():
    for level, low in (("easy", 200), ("hard", 100)):
        pairs = load_clues(level)
        assert len(pairs) >= low
        words = [w for w, _ in pairs]
        assert len(set(words)) == len(words)
        for word, clue in pairs:
            assert word.isalpha() and word.isupper() and 3 <= len(word) <= 11
            assert not re.search(rf"\b{word}", clue, re.IGNORECASE), (
                f"the clue of {word} gives it away"
            )
    assert not {w for w, _ in load_clues("easy")} & {w for w, _ in load_clues("hard")}
    assert load_clues("easy") is load_clues("easy")  # read once per process
    with pytest.raises(ValueError, match="level"):
        load_clues("medium")


def test_moves_wrong_invalid_and_format():
    env = gem_core.make("game:Crosswords-v0-easy", format_error="retry")
    env.reset(seed=4)
    game = env.unwrapped
    (r, c) = game.layout.letter_cells()[0]
    right = game.layout.grid[r][c]
    wrong = "Z" if right != "Z" else "Q"
    obs, reward, _, _, info = env.step(f"\\boxed{{{r} {c} {wrong.lower()}}}")
    assert reward == 0.0 and not info["invalid_action"] and "incorrect" in obs
    assert f"{wrong} at ({r}, {c})" in obs  # the wrong try is listed
    _, _, _, _, info = env.step(f"\\boxed{{{r} {c} {wrong}}}")
    assert info["invalid_action"] and not info["format_error"]  # same wrong try again
    _, reward, _, _, info = env.step(f"\\boxed{{[{r}, {c}, {right}]}}")
    assert reward == pytest.approx(SCALE / game._total) and not info["invalid_action"]
    _, _, _, _, info = env.step(f"\\boxed{{{r} {c} {right}}}")
    assert info["invalid_action"]  # already filled
    for bad in ("99 0 A", "-1 0 A", "0 99 A"):
        _, reward, _, _, info = env.step(f"\\boxed{{{bad}}}")
        assert info["invalid_action"] and not info["format_error"] and reward == 0.0
    blocks = [
        (i, j) for i, row in enumerate(game.layout.grid) for j, v in enumerate(row) if v is None
    ]
    if blocks:
        obs, _, _, _, info = env.step(f"\\boxed{{{blocks[0][0]} {blocks[0][1]} A}}")
        assert info["invalid_action"] and "block" in obs
    for junk in ("0 0", "0 0 AB", "a b c", "0 0 7"):
        _, reward, _, _, info = env.step(f"\\boxed{{{junk}}}")
        assert info["format_error"] and reward == pytest.approx(-0.1)


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


def test_random_variant_draws_settings():
    env = CrosswordsEnv(hardcore=None, num_words=None, max_turns=None)
    seen = set()
    for seed in range(40):
        env.reset(seed=seed)
        seen.add((env.hardcore, env.num_words))
        assert env.max_turns == 10 * env.num_words + 10 >= env._total
        assert len(env.layout.words) == env.num_words
    assert len(seen) == 6


def test_oracle_and_render():
    env = CrosswordsEnv()
    obs, _ = env.reset(seed=0)
    assert "\\boxed{row column letter}" in obs and ("Across" in obs or "Down" in obs)
    assert "R00" in obs and "C00" in obs
    env.step(oracle(env))
    assert "Filled 1/" in env.state_summary()


def test_move_grammar_is_the_former_regex():
    # The scanner that replaced the backtracking regex accepts exactly the same texts.
    from tests.envs.games._grammar import DIGITS, SPACES, check_against_regex

    former = re.compile(r"\[?\s*(-?\d{1,6})\s*[,\s]\s*(-?\d{1,6})\s*[,\s]\s*([A-Za-z])\s*\]?")
    env = gem_core.make("game:Crosswords-v0-easy")
    env.reset(seed=0)
    number = ["1", "-2", "12", "123456", "1234567", "\u0663", "-", "+1", "x"]
    sep = [" ", ",", " , ", "\t", ",,", "", "\u00a0,"]
    check_against_regex(
        env.unwrapped.parse_move,
        former,
        lambda m: (int(m.group(1)), int(m.group(2)), m.group(3).upper()),
        [*SPACES, *DIGITS, "-", ",", "[", "]", "a", "Z", "\u0131", "ab"],
        [["", " ", "["], ["", " "], number[:5], sep[:5], number, sep, ["a", "Z", "q", "\u0131", "ab", "1"],
         ["", " ", "\n"], ["", "]", " ]", "]]"], ["", " ", "\t"]],
        strip=True,
    )
