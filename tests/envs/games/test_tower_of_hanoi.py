"""Tower of Hanoi: optimal oracle (2ⁿ − 1 moves), exact distance, rules and reward accounting."""

from __future__ import annotations

import itertools
from collections import deque

import pytest

import gem_core
from gem_core.envs.games.oracles import play_oracle_episode
from gem_core.envs.games.tower_of_hanoi import PEGS, TowerofHanoiEnv, distance_to_goal, oracle
from tests.envs.games._fast_path import play_side_by_side

IDS = ["game:TowerofHanoi-v0-easy", "game:TowerofHanoi-v0-hard", "game:TowerofHanoi-v0-random"]


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_every_seed_optimally(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        n = env.unwrapped.num_disks
        assert success, f"{env_id} seed {seed}: oracle failed"
        assert turns == 2**n - 1, f"{env_id} seed {seed}: {turns} moves, optimal is {2**n - 1}"
        scale = env.unwrapped.progress_scale
        assert 1.0 <= total <= 1.0 + scale + 1e-9


@pytest.mark.parametrize("n", range(1, 9))
def test_oracle_is_optimal_for_any_height(n):
    env = TowerofHanoiEnv(num_disks=n, max_turns=2**n + 5)
    env.reset(seed=0)
    moves = 0
    while True:
        _, _, terminated, truncated, info = env.step(oracle(env))
        moves += 1
        if terminated or truncated:
            break
    assert info["success"] and moves == 2**n - 1


def _neighbours(state: tuple[int, ...]):
    """Legal successors; ``state[d - 1]`` is the peg of disk d."""
    for disk, peg in enumerate(state, start=1):
        if any(state[d - 1] == peg for d in range(1, disk)):
            continue  # a smaller disk sits on top
        for dst in range(3):
            if dst != peg and not any(state[d - 1] == dst for d in range(1, disk)):
                yield state[: disk - 1] + (dst,) + state[disk:]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_distance_is_exact_graph_distance(n):
    goal = (2,) * n
    dist = {goal: 0}
    queue = deque([goal])
    while queue:
        s = queue.popleft()
        for t in _neighbours(s):
            if t not in dist:
                dist[t] = dist[s] + 1
                queue.append(t)
    assert len(dist) == 3**n
    for state in itertools.product(range(3), repeat=n):
        pegs = [[d for d in range(n, 0, -1) if state[d - 1] == p] for p in range(3)]
        assert distance_to_goal(pegs) == dist[state]
    assert max(dist.values()) == 2**n - 1


def test_oracle_recovers_from_detours():
    env = TowerofHanoiEnv(num_disks=4, max_turns=60)
    env.reset(seed=0)
    for action in [r"\boxed{A B}", r"\boxed{A C}", r"\boxed{B C}", r"\boxed{A B}"]:
        env.step(action)
    left = env.distance
    for _ in range(left):
        _, _, terminated, _, info = env.step(oracle(env))
    assert terminated and info["success"]


def test_parsing_and_invalid_moves_are_distinct_from_format_errors():
    env = gem_core.make("game:TowerofHanoi-v0-easy", format_error="retry")
    env.reset(seed=0)
    for text in [r"\boxed{A C}", r"\boxed{a, b}", r"\boxed{C to B}", r"\boxed{AC}"]:
        assert env.unwrapped.parse_move(text[7:-1]) is not None, text
    cases = {
        r"\boxed{B C}": "peg B is empty",
        r"\boxed{A A}": "both A",
        r"\boxed{A D}": "no peg D",
    }
    for action, message in cases.items():
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["invalid_action"] and not info["format_error"], action
        assert message in obs and reward == 0.0
    env.step(r"\boxed{A C}")  # disk 1 on C
    obs, _, _, _, info = env.step(r"\boxed{A C}")  # disk 2 onto disk 1
    assert info["invalid_action"] and "smaller disk 1" in obs
    _, reward, _, _, info = env.step(r"\boxed{A}")
    assert info["format_error"] and reward == pytest.approx(-0.1)


def test_back_and_forth_earns_nothing():
    env = TowerofHanoiEnv(num_disks=3, max_turns=100)
    env.reset(seed=0)
    total = 0.0
    for _ in range(10):
        total += env.step(r"\boxed{A B}")[1] + env.step(r"\boxed{B A}")[1]
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
        # The sum telescopes to scale * Φ(last state).
        n = env.unwrapped.num_disks
        expected = scale * (1 - env.unwrapped.distance / (2**n - 1))
        if not info["success"]:
            assert progress == pytest.approx(expected)


def test_random_variant_draws_all_configurations():
    env = gem_core.make("game:TowerofHanoi-v0-random")
    seen = set()
    for seed in range(40):
        env.reset(seed=seed)
        seen.add((env.unwrapped.num_disks, env.unwrapped.max_turns))
    assert seen == {(3, 10), (4, 20), (5, 35)}


def test_state_summary_and_render():
    env = TowerofHanoiEnv(num_disks=3, max_turns=10)
    obs, _ = env.reset(seed=0)
    assert r"\boxed{A C}" in obs and "A: [3, 2, 1]" in obs
    env.step(r"\boxed{A C}")
    summary = env.state_summary()
    assert "C: [1]" in summary and "Last moves: A C" in summary
    assert set(PEGS) == {"A", "B", "C"}


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="num_disks"):
        TowerofHanoiEnv(num_disks=0)


def test_move_grammar_is_the_former_regex():
    # The scanner that replaced the backtracking regex accepts exactly the same texts.
    import re

    from tests.envs.games._grammar import SPACES, check_against_regex

    former = re.compile(r"\s*([A-Za-z])\s*(?:,|->|→|to)?\s*([A-Za-z])\s*\.?\s*", re.IGNORECASE)
    env = gem_core.make("game:TowerofHanoi-v0-easy")
    env.reset(seed=0)
    letter = ["A", "b", "C", "t", "T", "o", "\u0131", "\u017f", "\u212a", "\u0130", "1", "", "AB"]
    check_against_regex(
        env.unwrapped.parse_move,
        former,
        lambda m: (m.group(1).upper(), m.group(2).upper()),
        [*SPACES, *letter, ",", "->", "-", ">", "→", "to", "TO", "tO", ".", ".."],
        [["", " ", "\n"], letter, ["", " ", "\u00a0"], ["", ",", "->", "→", "to", "To", "TO", "t", "-", "to to"],
         ["", " "], letter, ["", " "], ["", ".", "..", "!"], ["", " ", "\t"]],
    )


class _GeneralPath(TowerofHanoiEnv):
    """A subclass: `TowerofHanoiEnv.step` sends it down LanguageGame.step's general path."""


@pytest.mark.parametrize("variant", [{"num_disks": 3, "max_turns": 10}, {"num_disks": 2, "max_turns": 12},
                                     {"num_disks": None, "max_turns": None}, {"num_disks": 2, "max_turns": 4, "invalid_penalty": -1}])
def test_the_one_frame_common_move_returns_what_the_general_path_returns(variant):
    """The fast `step` against LanguageGame.step, action by action: same observation,
    reward, flags, info and state, on legal, illegal, solving and odd moves."""
    import random

    odd = ["\\boxed{a c}", "\\boxed{A  C}", "\\boxed{A->C}", "\\boxed{A C.}", "\\boxed{A D}", "\\boxed{AC }",
           "\\boxed{}", "\\boxed{\\A C}", "\\boxed{{A C}}", "\\boxed{A C", "no box", "\\boxed{A B} then \\boxed{B C}",
           "x \\boxed{A C} \\frac{1}{2}", None, 7]
    rng = random.Random(0)
    fast, general = TowerofHanoiEnv(**variant), _GeneralPath(**variant)

    def next_action(env):
        roll = rng.random()
        if roll < 0.1:
            action = rng.choice(odd)
        elif roll < 0.6:  # the oracle's move: episodes get solved
            action = oracle(env)
        else:  # any two letters, the same peg twice included
            action = f"move \\boxed{{{rng.choice(PEGS)} {rng.choice(PEGS)}}}"
        return action

    state = lambda env: (env.turn, env.pegs, env.peg_of, env.distance, env.moves, env.done, env.success)  # noqa: E731
    counts = play_side_by_side(fast, general, range(300), next_action, state)
    assert counts["steps"] > 400 and counts["moves"] > 200 and counts["solved"] > 10  # every path was exercised
