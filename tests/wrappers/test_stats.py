"""Tests for gem_core.wrappers.stats: EpisodeStats puts the episode's figures in the final info."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.errors import InvalidArgument
from gem_core.wrappers import EpisodeStats, TimeLimit
from tests.testing_env import GenericTestEnv, counting_step


def _play(env, actions=("a",) * 100):
    env.reset(seed=0)
    for action in actions:
        result = env.step(action)
        if result[2] or result[3]:
            return result
    raise AssertionError("episode did not end")


def test_final_info_has_the_episode_figures():
    env = EpisodeStats(GenericTestEnv(episode_len=3))
    env.reset(seed=0)
    assert "episode" not in env.step("a")[4]
    assert "episode" not in env.step("a")[4]
    *_, info = env.step("a")
    episode = info["episode"]
    assert set(episode) == {"return", "turns", "success", "duration_s"}
    assert (episode["return"], episode["turns"], episode["success"]) == (6.0, 3, True)
    assert type(episode["return"]) is float and type(episode["turns"]) is int
    assert 0.0 <= episode["duration_s"] < 10.0
    assert info["success"] is True and info["action"] == "a"


def test_truncated_episode_without_success_reports_false():
    env = EpisodeStats(
        TimeLimit(
            GenericTestEnv(episode_len=100, step_fn=lambda e, a: (*counting_step(e, a)[:4], {})),
            max_turns=2,
        )
    )
    _, _, terminated, truncated, info = _play(env)
    assert (terminated, truncated) == (False, True)
    assert info["episode"]["success"] is False and info["episode"]["turns"] == 2


def test_env_info_dict_is_not_modified():
    shared: dict = {"success": False}
    env = EpisodeStats(GenericTestEnv(step_fn=lambda e, a: ("o", 0.5, True, False, shared)))
    info = _play(env)[4]
    assert "episode" in info and shared == {"success": False}


def test_running_counters_and_queues():
    env = EpisodeStats(gem_core.make("toy:Echo-v0"), buffer_length=2)
    # Episode 1: solved on the second turn. Episodes 2 and 3: never solved (truncated).
    env.reset(seed=0)
    word = env.unwrapped.word
    env.step("nope")
    assert (env.episode_turns, env.episode_return) == (1, 0.0)
    env.step(word)
    for _ in range(2):
        _play(env, ["", "", "", ""])
    assert env.episodes == 3 and env.successes == 1 and env.total_turns == 10
    assert list(env.turns_queue) == [4, 4] and list(env.success_queue) == [False, False]
    assert list(env.return_queue) == pytest.approx([-0.4, -0.4])
    assert len(env.duration_queue) == 2
    assert env.success_rate == 0.0
    env.reset()
    assert (env.episode_turns, env.episode_return, env.total_turns) == (0, 0.0, 10)


def test_success_rate_before_any_episode_is_zero():
    assert EpisodeStats(GenericTestEnv()).success_rate == 0.0


@pytest.mark.parametrize("bad", [0, -3, 2.0, True])
def test_bad_buffer_length(bad):
    with pytest.raises(InvalidArgument, match=f"buffer_length must be a positive int, got {bad!r}"):
        EpisodeStats(GenericTestEnv(), buffer_length=bad)


def test_episode_stats_passes_the_env_checker():
    gem_core.check_env(EpisodeStats(gem_core.make("toy:Echo-v0")), warn=False)
