"""Sokoban: reverse-play generation is solvable, the A* oracle wins, rewards cannot be farmed."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.games.base import extract_last_boxed
from gem_core.envs.games.oracles import play_oracle_episode
from gem_core.envs.games.sokoban import _NAMES, SokobanEnv, oracle, solve

IDS = ["game:Sokoban-v0-easy", "game:Sokoban-v0-hard", "game:Sokoban-v0-random"]
SCALE = 0.1  # default progress_scale


def _replay(env: SokobanEnv, moves: list[int]) -> bool:
    """Play direction indices; True when the last one wins and none is invalid."""
    info = {}
    for d in moves:
        _, _, terminated, _, info = env.step(f"\\boxed{{{_NAMES[d]}}}")
        assert not info["invalid_action"]
        if terminated:
            break
    return bool(info.get("success"))


@pytest.mark.parametrize("env_id", IDS)
def test_rooms_solvable_by_construction_within_budget(env_id):
    env = gem_core.make(env_id)
    game = env.unwrapped
    for seed in range(0, 400, 4):
        env.reset(seed=seed)
        assert 1 <= len(game.solution) <= game.max_turns
        assert not all(b in game.room.targets for b in game.boxes), "room starts solved"
        assert _replay(game, game.solution), f"{env_id} seed {seed}: construction solution fails"


def test_astar_is_no_longer_than_construction():
    env = SokobanEnv(dim_room=(7, 7), num_boxes=3, max_turns=35)
    for seed in range(40):
        env.reset(seed=seed)
        plan = solve(env.room, env.player, env.boxes_sorted())
        assert plan is not None and len(plan) <= len(env.solution)
        assert _replay(env, plan)


@pytest.mark.parametrize("env_id", ["game:Sokoban-v0-easy", "game:Sokoban-v0-hard"])
def test_oracle_solves_seeds_0_to_199(env_id):
    env = gem_core.make(env_id)
    for seed in range(200):
        success, turns, total = play_oracle_episode(env, seed=seed)
        assert success, f"{env_id}: oracle failed on seed {seed}"
        assert turns <= env.unwrapped.max_turns
        assert 1.0 <= total < 1.0 + SCALE + 1e-9, f"seed {seed}: return {total}"


def test_oracle_on_random_variant():
    env = gem_core.make("game:Sokoban-v0-random")
    assert all(play_oracle_episode(env, seed=s)[0] for s in range(60))


@pytest.mark.parametrize("env_id", IDS)
def test_random_play_progress_rewards_within_bounds(env_id):
    env = gem_core.make(env_id)
    for seed in range(30):
        env.reset(seed=seed)
        progress = 0.0
        while True:
            _, reward, terminated, truncated, info = env.step(env.unwrapped.sample_random_action())
            assert not info["format_error"]
            if info["success"]:
                assert reward == 1.0
            else:
                assert reward >= 0.0
                progress += reward
            if terminated or truncated:
                break
        assert 0.0 <= progress < SCALE + 1e-9


ROOM = """
# # # # # # #
# _ _ _ _ _ #
# P X _ O _ #
# _ _ _ _ _ #
# # # # # # #
"""


def test_pushing_on_and_off_a_goal_pays_once():
    env = SokobanEnv(dim_room=(5, 7), num_boxes=1, max_turns=40)
    env.reset(seed=0)
    env.load_board(ROOM)
    rewards = [env.step(r"\boxed{right}")[1]]  # box two squares from the goal -> one
    assert rewards[0] == pytest.approx(SCALE / 2)
    # Walk around the box and push it back (away from the goal), then forward again.
    for move in ["up", "right", "right", "down", "left"]:
        _, reward, _, _, info = env.step(f"\\boxed{{{move}}}")
        assert not info["invalid_action"], move
        assert reward == 0.0, "moving the box away, or regaining lost ground, pays nothing"
    for move in ["up", "left", "left", "down"]:
        assert env.step(f"\\boxed{{{move}}}")[1] == 0.0
    assert env.step(r"\boxed{right}")[1] == 0.0  # back to the best distance so far: no pay
    _, reward, terminated, _, info = env.step(r"\boxed{right}")
    assert terminated and info["success"] and reward == 1.0


def test_invalid_move_is_not_a_format_error():
    env = gem_core.make("game:Sokoban-v0-easy", format_error="retry")
    env.reset(seed=0)
    game = env.unwrapped
    game.load_board(ROOM)
    before = game.board()
    obs, reward, terminated, truncated, info = env.step(r"\boxed{left}")  # a wall
    assert info["invalid_action"] and not info["format_error"] and reward == 0.0
    assert "wall" in obs and game.board() == before and not terminated
    game.load_board(
        ROOM.replace("_ O _ #", "X O _ #").replace("# _ _ _ _ _ #\n# #", "# _ _ _ _ O #\n# #")
    )
    _, _, _, _, info = env.step(r"\boxed{right}")  # box into box
    assert info["invalid_action"]
    _, reward, terminated, _, info = env.step(r"\boxed{jump}")
    assert info["format_error"] and reward == pytest.approx(-0.1) and not terminated


@pytest.mark.parametrize("text", ["up", "UP", " Left ", "r", "D", "east"])
def test_action_words(text):
    assert SokobanEnv().parse_move(text) is not None


def test_board_symbols_and_roundtrip():
    env = SokobanEnv()
    env.reset(seed=3)
    board = env.board()
    assert set(board.replace(" ", "").replace("\n", "")) <= set("#_OX√PS")
    env2 = SokobanEnv()
    env2.reset(seed=99)
    env2.load_board(board)
    assert env2.board() == board
    assert extract_last_boxed(oracle(env2)) in _NAMES


def test_random_variant_and_room_size_alias():
    env = SokobanEnv(dim_room=None, num_boxes=None, max_turns=None)
    seen = set()
    for seed in range(40):
        env.reset(seed=seed)
        seen.add((env.dim_room, env.num_boxes, env.max_turns))
        assert env.max_turns >= len(env.solution)
    assert len(seen) > 5
    alias = SokobanEnv(room_size=None, num_boxes=2, max_turns=20)
    alias.reset(seed=1)
    assert 6 <= alias.dim_room[0] <= 8
    assert SokobanEnv(room_size=(7, 9)).dim_room == (7, 9)


def test_same_seed_same_room():
    a, b = (
        SokobanEnv(dim_room=(8, 8), num_boxes=4, max_turns=50),
        SokobanEnv(dim_room=(8, 8), num_boxes=4, max_turns=50),
    )
    for seed in (0, 7, 123):
        assert a.reset(seed=seed)[0] == b.reset(seed=seed)[0]


def test_load_board_rejects_bad_levels():
    env = SokobanEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one player"):
        env.load_board(ROOM.replace("P", "_"))
    with pytest.raises(ValueError, match="unknown symbol"):
        env.load_board(ROOM.replace("P", "Q"))
