"""Minesweeper: safe first reveal, rules, the constraint-solver oracle and reward accounting.

Why the oracle bar is 75% and not 90%: under the reference rules (mines placed after the
first reveal, never in its 3x3 neighbourhood) no strategy wins more than 80.1% of the
easy boards — `test_easy_boards_cannot_be_won_90_percent_of_the_time` computes that
optimum exactly. The oracle's measured rates on seeds 0-199: easy 82.0%, hard 77.5%,
random 83.5%.
"""

from __future__ import annotations

import itertools

import pytest

import gem_core
from gem_core.envs.games.minesweeper import MinesweeperEnv, mine_probabilities, oracle
from gem_core.envs.games.oracles import play_oracle_episode

IDS = ["game:Minesweeper-v0-easy", "game:Minesweeper-v0-hard", "game:Minesweeper-v0-random"]


@pytest.mark.parametrize("env_id", IDS)
def test_first_reveal_is_always_safe_and_opens_an_area(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        env.reset(seed=seed)
        u = env.unwrapped
        r, c = u.rng.randrange(u.rows), u.rng.randrange(u.cols)
        obs, reward, terminated, _, info = env.step(f"\\boxed{{reveal {r} {c}}}")
        assert not info["invalid_action"] and not (terminated and not info["success"]), (seed, r, c)
        assert sum(u.mines) == u.num_mines
        i = r * u.cols + c
        assert u.counts[i] == 0 and not any(u.mines[j] for j in u._neigh[i])
        assert u.n_revealed >= 1 + len(u._neigh[i]) and reward > 0


@pytest.mark.parametrize("env_id,floor", [(IDS[0], 0.75), (IDS[1], 0.75), (IDS[2], 0.75)])
def test_oracle_success_rate(env_id, floor):
    env = gem_core.make(env_id)
    wins = 0
    for seed in range(200):
        success, _, total = play_oracle_episode(env, seed=seed)
        wins += success
        progress = total - (1.0 if success else 0.0)
        assert 0.0 <= progress < env.unwrapped.progress_scale
    assert wins / 200 >= floor, f"{env_id}: oracle won {wins}/200"


def _optimal_win_probability(rows: int, cols: int, mines: int, first: tuple[int, int]) -> float:
    """Exact best win probability from a first reveal (expectimax over all layouts).

    An independent brute force: every layout with the first cell's neighbourhood clear
    is equally likely; a state is the set of layouts consistent with what is shown. A
    provably safe cell is always revealed first (it never hurts).
    """
    n = rows * cols
    nb = []
    for i in range(n):
        r, c = divmod(i, cols)
        nb.append([rr * cols + cc for rr in range(max(0, r - 1), min(rows, r + 2))
                   for cc in range(max(0, c - 1), min(cols, c + 2)) if (rr, cc) != (r, c)])
    nbm = [sum(1 << j for j in nb[i]) for i in range(n)]
    f = first[0] * cols + first[1]
    zone = {f, *nb[f]}
    layouts = [sum(1 << i for i in combo) for combo in itertools.combinations([i for i in range(n) if i not in zone], mines)]

    def value(lay: int, i: int) -> int:
        return bin(lay & nbm[i]).count("1")

    def flood(lay: int, shown: int, c: int) -> int:
        shown |= 1 << c
        stack = [c] if value(lay, c) == 0 else []
        while stack:
            for j in nb[stack.pop()]:
                if not shown >> j & 1:
                    shown |= 1 << j
                    if value(lay, j) == 0:
                        stack.append(j)
        return shown

    def children(group, shown: int, c: int):
        out: dict = {}
        for lay in group:
            if not lay >> c & 1:
                new = flood(lay, shown, c)
                sig = (new, tuple(value(lay, j) for j in range(n) if (new & ~shown) >> j & 1))
                out.setdefault(sig, []).append(lay)
        return out

    memo: dict = {}

    def best(group: frozenset, shown: int) -> float:
        if bin(shown).count("1") == n - mines:
            return 1.0
        key = (shown, group)
        if key not in memo:
            hidden = [i for i in range(n) if not shown >> i & 1]
            union, inter = 0, (1 << n) - 1
            for lay in group:
                union |= lay
                inter &= lay
            safe = [i for i in hidden if not union >> i & 1]
            options = safe[:1] or [i for i in hidden if not inter >> i & 1]
            memo[key] = max(
                sum(len(g) * best(frozenset(g), s) for (s, _), g in children(group, shown, c).items()) / len(group)
                for c in options
            )
        return memo[key]

    return sum(len(g) * best(frozenset(g), s) for (s, _), g in children(layouts, 0, f).items()) / len(layouts)


def test_easy_boards_cannot_be_won_90_percent_of_the_time():
    # Centre first reveal (the oracle's choice, and the best one: corners give 71.5%,
    # (1, 1) 74.9%, (1, 2) 77.5%, computed the same way offline).
    p = _optimal_win_probability(5, 5, 5, (2, 2))
    assert p == pytest.approx(0.80128, abs=1e-4)


def test_mine_probabilities_are_consistent():
    env = MinesweeperEnv(rows=8, cols=8, num_mines=12, max_turns=64)
    for seed in range(20):
        env.reset(seed=seed)
        while True:
            _, _, terminated, truncated, _ = env.step(oracle(env))
            if terminated or truncated:
                break
            probs = mine_probabilities(env)
            hidden = [i for i in range(64) if not env.revealed[i]]
            assert sorted(probs) == hidden
            assert sum(probs.values()) == pytest.approx(env.num_mines)
            # A cell the solver calls safe is safe; one it calls a mine is a mine.
            for i, p in probs.items():
                if p == 0.0:
                    assert not env.mines[i]
                if p == 1.0:
                    assert env.mines[i]


def test_rules_flags_invalid_moves_and_format_errors():
    env = MinesweeperEnv(rows=5, cols=5, num_mines=5, max_turns=25, format_error="retry")
    env.reset(seed=0)
    obs, _, _, _, info = env.step(r"\boxed{flag 0 0}")
    assert not info["invalid_action"] and "placed a flag" in obs and "F" in obs
    obs, _, _, _, info = env.step(r"\boxed{reveal 0 0}")
    assert info["invalid_action"] and "flagged" in obs
    obs, _, _, _, info = env.step(r"\boxed{reveal 7 1}")
    assert info["invalid_action"] and "outside" in obs
    obs, _, _, _, info = env.step(r"\boxed{dig 1 1}")
    assert info["invalid_action"] and "unknown move" in obs
    obs, reward, _, _, info = env.step(r"\boxed{reveal one two}")
    assert info["format_error"] and reward == pytest.approx(-0.1)
    obs, reward, _, _, info = env.step(r"\boxed{reveal (2, 2)}")
    assert not info["invalid_action"] and reward > 0 and env.mines_placed
    obs, _, _, _, info = env.step(r"\boxed{reveal 2 2}")
    assert info["invalid_action"] and "already revealed" in obs
    obs, _, _, _, info = env.step(r"\boxed{flag 2 2}")
    assert info["invalid_action"]
    mine = env.mines.index(True)
    r, c = divmod(mine, 5)
    if env.flagged[mine]:
        env.step(f"\\boxed{{flag {r} {c}}}")
    obs, reward, terminated, _, info = env.step(f"\\boxed{{reveal {r} {c}}}")
    assert terminated and not info["success"] and reward == 0.0 and "*" in obs


def test_layout_depends_on_seed_and_first_cell_only():
    a, b = MinesweeperEnv(), MinesweeperEnv()
    a.reset(seed=5)
    b.reset(seed=5)
    for _ in range(7):  # random actions before the first reveal draw from b's RNG
        b.sample_random_action()
    b.step(r"\boxed{flag 0 1}")
    a.step(r"\boxed{reveal 4 4}")
    b.step(r"\boxed{reveal 4 4}")
    assert a.mines == b.mines


def test_win_and_progress_accounting_on_random_play():
    env = gem_core.make("game:Minesweeper-v0-random")
    for seed in range(100):
        env.reset(seed=seed)
        total = 0.0
        while True:
            _, reward, terminated, truncated, info = env.step(env.sample_random_action())
            total += reward
            if terminated or truncated:
                break
        progress = total - (1.0 if info["success"] else 0.0)
        assert 0.0 <= progress < env.unwrapped.progress_scale
