"""Fifteen Puzzle: solvable/reachable boards within budget, oracle, rules and reward accounting."""

from __future__ import annotations

from collections import deque

import pytest

import gem_core
from gem_core.envs.games.fifteen_puzzle import (
    DIRECTIONS,
    FifteenPuzzleEnv,
    _ida_star,
    _tables,
    _weighted_a_star,
    is_solvable,
    manhattan,
    oracle,
    solve,
)
from gem_core.envs.games.oracles import play_oracle_episode
from tests.envs.games._fast_path import play_side_by_side

IDS = ["game:FifteenPuzzle-v0-easy", "game:FifteenPuzzle-v0-hard", "game:FifteenPuzzle-v0-random"]


def _apply(tiles: list[int], n: int, moves: list[str]) -> list[int]:
    tiles = list(tiles)
    blank = tiles.index(0)
    for name in moves:
        nb = next(b for b, m in _tables(n)[1][blank] if m == name)
        tiles[blank], tiles[nb] = tiles[nb], 0
        blank = nb
    return tiles


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_every_seed(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        assert success, f"{env_id} seed {seed}: oracle failed"
        assert turns <= env.unwrapped.max_turns
        assert 1.0 <= total <= 1.0 + env.unwrapped.progress_scale + 1e-9


@pytest.mark.parametrize("env_id", IDS)
def test_boards_are_reachable_and_solvable_within_budget(env_id):
    env = gem_core.make(env_id).unwrapped
    for seed in range(100):
        env.reset(seed=seed)
        n = env.num_rows
        assert sorted(env.tiles) == list(range(n * n))
        assert is_solvable(env.tiles, n)
        assert env.distance == manhattan(env.tiles, n) > 0  # not already solved
        optimal = _ida_star(env.tiles, n, 10**7)
        assert optimal is not None
        assert len(optimal) <= env.scramble_moves <= env.max_turns
        assert _apply(env.tiles, n, optimal) == list(range(1, n * n)) + [0]


def test_is_solvable_matches_reachability_on_2x2_and_3x3():
    for n in (2, 3):
        goal = tuple(range(1, n * n)) + (0,)
        seen = {goal}
        queue = deque([goal])
        while queue:
            s = queue.popleft()
            blank = s.index(0)
            for nb, _ in _tables(n)[1][blank]:
                t = list(s)
                t[blank], t[nb] = t[nb], 0
                t = tuple(t)
                if t not in seen:
                    seen.add(t)
                    queue.append(t)
        assert len(seen) == {2: 12, 3: 181440}[n]
        for s in list(seen)[:2000]:
            assert is_solvable(s, n)
            swapped = list(s)
            i, j = [k for k, v in enumerate(swapped) if v][:2]
            swapped[i], swapped[j] = swapped[j], swapped[i]
            assert not is_solvable(swapped, n)


def test_solver_is_optimal_and_fallback_is_bounded():
    env = FifteenPuzzleEnv(num_rows=4, max_turns=50)
    for seed in range(10):
        env.reset(seed=seed)
        exact = _ida_star(env.tiles, 4, 10**7)
        weighted = _weighted_a_star(env.tiles, 4, 1.5)
        assert len(exact) <= len(weighted) <= 1.5 * len(exact)
        assert _apply(env.tiles, 4, weighted) == list(range(1, 16)) + [0]
        assert solve(env.tiles, 4, node_limit=1) == weighted  # past the budget: weighted A*
    with pytest.raises(ValueError, match="not solvable"):
        solve([2, 1, 3, 0], 2)


def test_oracle_recovers_after_detours():
    env = gem_core.make("game:FifteenPuzzle-v0-hard")
    env.reset(seed=3)
    oracle = gem_core.envs.games.oracles.fifteen_puzzle
    for _ in range(6):
        env.step(env.sample_random_action())
    while True:
        _, _, terminated, truncated, info = env.step(oracle(env))
        assert not info["invalid_action"]
        if terminated or truncated:
            break
    assert info["success"]


def test_moves_invalid_moves_and_format_errors():
    env = FifteenPuzzleEnv(num_rows=3, max_turns=20, format_error="retry")
    env.reset(seed=0)
    # Put the board in a known state with the blank at the bottom-right corner.
    env.tiles = [1, 2, 3, 4, 5, 6, 7, 0, 8]
    env.blank, env.distance, env.start_distance, env._board = 7, 1, 1, None
    obs, reward, terminated, _, info = env.step(r"\boxed{up}")
    assert info["invalid_action"] and not info["format_error"] and not terminated
    assert "no tile can slide up" in obs and reward == 0.0
    obs, reward, terminated, _, info = env.step(r"\boxed{LEFT}")  # 8 slides left
    assert terminated and info["success"] and reward == 1.0
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(r"\boxed{north}")
    assert info["format_error"] and reward == pytest.approx(-0.1) and not terminated


def test_render_shows_the_board():
    env = FifteenPuzzleEnv(num_rows=2, max_turns=10)
    obs, _ = env.reset(seed=0)
    assert "__" in obs and r"\boxed{up}" in obs and "3-Puzzle" in obs
    assert "Manhattan distance" in env.state_summary()


def test_back_and_forth_earns_nothing():
    env = FifteenPuzzleEnv(num_rows=4, max_turns=50)
    env.reset(seed=1)
    opposite = {"up": "down", "down": "up", "left": "right", "right": "left"}
    total = 0.0
    for _ in range(10):
        move = next(m for _, m in _tables(4)[1][env.blank])
        total += env.step(f"\\boxed{{{move}}}")[1]
        total += env.step(f"\\boxed{{{opposite[move]}}}")[1]
        if env.done:
            break
    assert total == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("env_id", IDS)
def test_progress_rewards_stay_in_documented_range(env_id):
    env = gem_core.make(env_id)
    scale = env.unwrapped.progress_scale
    for seed in range(100):
        env.reset(seed=seed)
        progress = 0.0
        while True:
            _, reward, terminated, truncated, info = env.step(env.sample_random_action())
            if not info["success"]:
                progress += reward
            if terminated or truncated:
                break
        assert -1e-9 <= progress <= scale + 1e-9
        u = env.unwrapped
        if not info["success"]:  # telescopes to scale * (Φ(last) + 1)
            m0 = u.start_distance
            assert progress == pytest.approx(scale * (1 - min(u.distance, m0) / m0))


def test_random_variant_draws_every_size_and_never_crashes():
    env = gem_core.make("game:FifteenPuzzle-v0-random")
    seen = set()
    for seed in range(60):
        env.reset(seed=seed)
        seen.add((env.unwrapped.num_rows, env.unwrapped.max_turns))
    assert seen == {(2, 10), (3, 20), (4, 50)}


def test_seeding_is_deterministic():
    a, b = FifteenPuzzleEnv(num_rows=4, max_turns=50), FifteenPuzzleEnv(num_rows=4, max_turns=50)
    assert a.reset(seed=7) == b.reset(seed=7)
    assert a.tiles == b.tiles
    a.reset(seed=8)
    assert a.tiles != b.tiles


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="num_rows"):
        FifteenPuzzleEnv(num_rows=1)
    with pytest.raises(ValueError, match="exceeds max_turns"):
        FifteenPuzzleEnv(num_rows=3, max_turns=10, scramble_moves=20)
    assert set(DIRECTIONS) == {"up", "down", "left", "right"}


class _GeneralPath(FifteenPuzzleEnv):
    """A subclass: `FifteenPuzzleEnv.step` sends it down LanguageGame.step's general path."""


@pytest.mark.parametrize("variant", [{"num_rows": 2, "max_turns": 10}, {"num_rows": 3, "max_turns": 20},
                                     {"num_rows": None, "max_turns": None}, {"num_rows": 2, "max_turns": 6, "invalid_penalty": -1}])
def test_the_one_frame_common_move_returns_what_the_general_path_returns(variant):
    """The fast `step` against LanguageGame.step, action by action: same observation,
    reward, flags, info and state, on legal, invalid, solving and odd moves."""
    import random

    odd = ["\\boxed{ up }", "\\boxed{UP}", "\\boxed{Left}", "\\boxed{}", "\\boxed{upp}", "\\boxed{\\up}",
           "\\boxed{{up}}", "\\boxed{up", "no box", "\\boxed{up} then \\boxed{down}", "x \\boxed{up} \\frac{1}{2}",
           "\\boxed{\\boxed{left}}", None, 7]
    rng = random.Random(0)
    fast, general = FifteenPuzzleEnv(**variant), _GeneralPath(**variant)

    def next_action(env):
        roll = rng.random()
        if roll < 0.1:
            action = rng.choice(odd)
        elif roll < 0.6:  # the oracle's move: episodes get solved
            action = oracle(env)
        else:
            action = f"I slide \\boxed{{{rng.choice(DIRECTIONS)}}}"
        return action

    state = lambda env: (env.turn, env.tiles, env.blank, env.distance, env.moves, env.done, env.success)  # noqa: E731
    counts = play_side_by_side(fast, general, range(300), next_action, state)
    assert counts["steps"] > 1000 and counts["moves"] > 500 and counts["solved"] > 50  # every path was exercised
