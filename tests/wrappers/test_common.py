"""Tests for gem_core.wrappers.common: OrderEnforcing, TimeLimit and the passive checker."""

from __future__ import annotations

import warnings

import pytest

from gem_core.errors import ClosedEnvError, InvalidArgument, ResetNeeded
from gem_core.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit
from tests.testing_env import GenericTestEnv, counting_step


# --- OrderEnforcing -----------------------------------------------------------------
def test_order_enforcing_step_before_reset():
    env = OrderEnforcing(GenericTestEnv())
    assert env.has_reset is False
    with pytest.raises(
        ResetNeeded,
        match=r"step\(\) called before reset\(\) on <GenericTestEnv instance>; call env.reset\(\) first",
    ):
        env.step("a")


def test_order_enforcing_step_after_the_end_pays_nothing():
    env = OrderEnforcing(GenericTestEnv(episode_len=2))
    env.reset()
    assert env.step("a")[2] is False
    assert env.step("a")[2] is True
    with pytest.raises(
        ResetNeeded,
        match=r"step\(\) called after the episode of .* ended \(terminated or truncated\); call env.reset\(\)",
    ):
        env.step("a")
    assert env.unwrapped.t == 2, "the finished episode was stepped again"
    env.reset()
    assert env.step("a")[0] == "obs 1"


def test_order_enforcing_after_close():
    env = OrderEnforcing(GenericTestEnv())
    env.reset()
    env.close()
    env.close()
    assert env.unwrapped.closed == 1
    with pytest.raises(ClosedEnvError, match=r"reset\(\) called on closed env"):
        env.reset()
    with pytest.raises(ClosedEnvError, match=r"step\(\) called on closed env"):
        env.step("a")


# --- TimeLimit -----------------------------------------------------------------------
def test_time_limit_truncates_at_max_turns_and_counts_turns():
    env = TimeLimit(GenericTestEnv(episode_len=100), max_turns=2)
    env.reset()
    first = env.step("a")
    second = env.step("a")
    assert (first[2], first[3], first[4]["turn"]) == (False, False, 1)
    assert (second[2], second[3], second[4]["turn"]) == (False, True, 2)
    assert env.elapsed_turns == 2
    # On its own, TimeLimit refuses nothing (OrderEnforcing does): it keeps truncating.
    assert env.step("a")[3] is True and env.elapsed_turns == 3
    env.reset()
    assert env.elapsed_turns == 0 and env.step("a")[3] is False


@pytest.mark.parametrize("between", [False, True], ids=["right-under", "with-a-layer-between"])
def test_time_limit_truncation_ends_the_episode_for_order_enforcing(between):
    inner = OrderEnforcing(GenericTestEnv(episode_len=100))
    env = TimeLimit(PassiveEnvChecker(inner) if between else inner, max_turns=2)
    env.reset()
    env.step("a")
    assert env.step("a")[3] is True
    with pytest.raises(
        ResetNeeded, match=r"step\(\) called after the episode of .* ended \(terminated or truncated\)"
    ):
        env.step("a")
    assert env.unwrapped.t == 2, "the truncated episode was stepped again"
    assert env.elapsed_turns == 2
    env.reset()
    assert env.step("a")[4]["turn"] == 1


def test_time_limit_over_order_enforcing_refuses_like_order_enforcing():
    env = TimeLimit(OrderEnforcing(GenericTestEnv(episode_len=100)), max_turns=3)
    with pytest.raises(ResetNeeded, match=r"step\(\) called before reset\(\)"):
        env.step("a")
    env.reset()
    env.close()
    with pytest.raises(ClosedEnvError, match=r"step\(\) called on closed env"):
        env.step("a")


def test_time_limit_a_task_end_on_the_last_turn_is_terminated_not_truncated():
    env = TimeLimit(GenericTestEnv(episode_len=2), max_turns=2)
    env.reset()
    env.step("a")
    _, _, terminated, truncated, info = env.step("a")
    assert (terminated, truncated, info["success"]) == (True, False, True)


def test_time_limit_keeps_an_env_truncation():
    step = lambda env, a: (*counting_step(env, a)[:3], True, {})  # noqa: E731
    env = TimeLimit(GenericTestEnv(episode_len=100, step_fn=step), max_turns=5)
    env.reset()
    assert env.step("a")[3] is True


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_time_limit_rejects_bad_max_turns(bad):
    with pytest.raises(InvalidArgument, match=f"max_turns must be a positive int, got {bad!r}"):
        TimeLimit(GenericTestEnv(), max_turns=bad)


# --- PassiveEnvChecker ---------------------------------------------------------------
def test_passive_checker_rejects_a_bad_reset_return():
    env = PassiveEnvChecker(GenericTestEnv(reset_fn=lambda env, seed, options: "obs"))
    with pytest.raises(
        TypeError,
        match=r"reset\(\) returned str; expected the tuple \(observation, info\)\. Likely bug: reset\(\) returns the observation alone or forgets to return",
    ):
        env.reset()


def test_passive_checker_rejects_a_4_tuple():
    env = PassiveEnvChecker(GenericTestEnv(step_fn=lambda env, a: ("obs", 0.0, False, {})))
    env.reset()
    with pytest.raises(
        TypeError,
        match=r"step\('a'\) returned tuple of length 4; expected \(observation, reward, terminated, truncated, info\)\. Likely bug: the old Gym 4-tuple API \(obs, reward, done, info\): split done",
    ):
        env.step("a")


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (("o", 0.0, 1, False, {}), r"returned terminated=1; it must be a bool"),
        (("o", 0.0, False, None, {}), r"returned truncated=None; it must be a bool"),
        (("o", "1", False, False, {}), r"returned reward='1'; it must be a number"),
        (("o", 0.0, False, False, []), r"step\(\) returned info of type list; expected a dict"),
    ],
)
def test_passive_checker_rejects_bad_step_values(result, message):
    env = PassiveEnvChecker(GenericTestEnv(step_fn=lambda env, a: result))
    env.reset()
    with pytest.raises(TypeError, match=message):
        env.step("a")


def test_passive_checker_warns_once_on_soft_issues():
    step = lambda env, a: ("o", 0.0, True, False, {})  # noqa: E731
    env = PassiveEnvChecker(
        GenericTestEnv(reset_fn=lambda env, seed, options: (3, {}), step_fn=step)
    )
    with pytest.warns(UserWarning, match="returned a int observation; gem_core envs return text"):
        env.reset()
    with pytest.warns(
        UserWarning, match=r"ended an episode \(terminated=True\) without info\['success'\]"
    ):
        env.step("a")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.reset()
        env.step("a")


def test_passive_checker_passes_results_through():
    env = PassiveEnvChecker(GenericTestEnv())
    assert env.reset(seed=1) == GenericTestEnv().reset(seed=1)
    assert env.step("x") == ("obs 1", 1.0, False, False, {"action": "x"})
