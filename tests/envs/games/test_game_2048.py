"""2048: slide/merge rules, oracle strength, invalid moves, game over and reward accounting."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.games.game_2048 import DIRECTIONS, Game2048Env, _can_move, oracle, slide
from gem_core.envs.games.oracles import play_oracle_episode

IDS = [
    "game:Game2048-v0-easy",
    "game:Game2048-v0-hard",
    "game:Game2048-v0-extreme-hard",
    "game:Game2048-v0-random",
]


def test_oracle_reaches_the_easy_target():
    env = gem_core.make("game:Game2048-v0-easy")
    wins = sum(play_oracle_episode(env, seed=seed)[0] for seed in range(200))
    assert wins >= 190, f"oracle reached 64 on {wins}/200 seeds (needs >= 95%)"


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ((2, 2, 2, 2), (4, 4, 0, 0)),
        ((2, 2, 4, 0), (4, 4, 0, 0)),  # a merged tile does not merge again
        ((0, 0, 0, 2), (2, 0, 0, 0)),
        ((4, 0, 4, 8), (8, 8, 0, 0)),
        ((2, 4, 2, 4), None),  # nothing moves
    ],
)
def test_slide_left(row, expected):
    board = row + (0,) * 12
    out = slide(board, 4, "left")
    assert (out[:4] if out else None) == expected


def test_slide_directions():
    board = (
        2, 0, 0, 2,
        2, 0, 0, 0,
        0, 0, 0, 0,
        4, 0, 0, 0,
    )  # fmt: skip
    assert slide(board, 4, "right")[:8] == (0, 0, 0, 4, 0, 0, 0, 2)
    assert slide(board, 4, "up")[::4] == (4, 4, 0, 0)
    assert slide(board, 4, "down")[::4] == (0, 0, 4, 4)


def test_invalid_move_adds_no_tile_and_game_over_ends_the_episode():
    env = Game2048Env(target_tile=64, max_turns=50, format_error="retry")
    env.reset(seed=0)
    env.board = [2, 4, 2, 4] + [0] * 12
    env.max_tile, env._grid = 4, None
    obs, reward, terminated, _, info = env.step(r"\boxed{left}")
    assert info["invalid_action"] and not info["format_error"] and not terminated
    assert "changes nothing" in obs and reward == 0.0 and env.board.count(0) == 12
    _, reward, _, _, info = env.step(r"\boxed{sideways}")
    assert info["format_error"] and reward == pytest.approx(-0.1)
    # Sliding right leaves one empty corner whose neighbours (8, 16) match no new tile.
    env.board = [
        8, 16, 32, 0,
        16, 2, 4, 2,
        2, 4, 2, 4,
        4, 2, 4, 2,
    ]  # fmt: skip
    obs, _, terminated, truncated, info = env.step(r"\boxed{right}")
    assert env.board.count(0) == 0 and not _can_move(env.board, 4)
    assert terminated and not truncated and not info["success"] and "game over" in obs
    assert not _can_move([2, 4, 4, 2], 2) and _can_move([2, 2, 4, 8], 2)


def test_the_losing_move_still_pays_its_progress():
    env = Game2048Env(target_tile=64, max_turns=50)
    env.reset(seed=0)
    env.board = [
        16, 16, 2, 8,
        2, 4, 2, 16,
        4, 2, 4, 2,
        2, 4, 2, 4,
    ]  # fmt: skip
    env.max_tile, env.start_max_tile = 16, 2
    _, reward, terminated, _, info = env.step(r"\boxed{left}")  # 16 + 16 -> 32, then stuck
    assert terminated and not info["success"] and env.max_tile == 32
    assert reward == pytest.approx(0.1 * (5 - 4) / (6 - 1))


def test_reaching_the_target_wins():
    env = Game2048Env(target_tile=16, max_turns=20)
    env.reset(seed=0)
    env.board = [8, 8] + [0] * 14
    env.max_tile = 8
    _, reward, terminated, _, info = env.step(r"\boxed{LEFT}")
    assert terminated and info["success"] and reward == 1.0


@pytest.mark.parametrize("env_id", IDS)
def test_progress_rewards_stay_in_documented_range(env_id):
    env = gem_core.make(env_id)
    u = env.unwrapped
    for seed in range(30):
        for use_oracle in (False, True):
            env.reset(seed=seed)
            progress = 0.0
            while True:
                action = oracle(u) if use_oracle else env.sample_random_action()
                _, reward, terminated, truncated, info = env.step(action)
                if info["success"]:
                    assert reward == 1.0
                else:
                    progress += reward
                if terminated or truncated:
                    break
            assert -1e-9 <= progress <= u.progress_scale + 1e-9
            if not info["success"]:  # telescopes to scale * Φ(largest tile)
                assert progress == pytest.approx(u.progress_scale * u._potential(u.max_tile))


def test_random_variant_draws_every_configuration():
    env = gem_core.make("game:Game2048-v0-random")
    seen = set()
    for seed in range(40):
        env.reset(seed=seed)
        seen.add((env.unwrapped.target_tile, env.unwrapped.max_turns))
    assert seen == {(16, 20), (32, 30), (64, 50)}


def test_spawns_come_from_the_env_generator():
    a, b = Game2048Env(target_tile=64, max_turns=50), Game2048Env(target_tile=64, max_turns=50)
    a.reset(seed=5)
    b.reset(seed=5)
    for move in DIRECTIONS * 3:
        assert a.step(f"\\boxed{{{move}}}") == b.step(f"\\boxed{{{move}}}")


def test_render_and_summary():
    env = Game2048Env(target_tile=64, max_turns=50)
    obs, _ = env.reset(seed=0)
    assert "Reach a 64 tile within 50 turns" in obs and r"\boxed{left}" in obs
    assert "largest tile" in env.state_summary()


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="power of two"):
        Game2048Env(target_tile=100)
    with pytest.raises(ValueError, match="board_size"):
        Game2048Env(board_size=1)
