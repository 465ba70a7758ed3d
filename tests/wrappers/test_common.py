"""Tests for gem_core.wrappers.common: OrderEnforcing, TimeLimit and the passive checker."""

from __future__ import annotations

import warnings

import pytest

import gem_core
from gem_core.core import find_layer
from gem_core.envs.games.guess_the_number import GuessTheNumberEnv
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


# --- the make() stack over an env that keeps the episode books ------------------------
class _UnfusedGuess(GuessTheNumberEnv):
    """The same game, refusing the hand-over: the wrappers keep their own books."""

    keeps_episode_books = False


def _stack(cls, limit, game_turns=4, format_error="terminate"):
    game = cls(min_number=1, max_number=10, max_turns=game_turns, format_error=format_error)
    return TimeLimit(OrderEnforcing(PassiveEnvChecker(game)), max_turns=limit)


def _play(env, actions, seeds):
    """Every step's result (or the error a refused step raised) over several episodes."""
    log = []
    for seed in seeds:
        log.append(env.reset(seed=seed))
        for action in actions:
            try:
                result = env.step(action)
            except ResetNeeded as e:
                log.append(("refused", type(e).__name__, str(e)))
                break
            log.append((result, env.elapsed_turns))
    return log


@pytest.mark.parametrize(
    ("limit", "game_turns", "format_error"),
    [(4, 4, "terminate"), (4, 4, "retry"), (2, 4, "retry"), (6, 4, "retry")],
    ids=["same-limit", "same-limit-retry", "time-limit-first", "game-limit-first"],
)
def test_the_stack_handing_its_books_to_the_game_plays_exactly_like_the_wrappers(limit, game_turns, format_error):
    actions = [r"\boxed{3}", "no box", r"\boxed{3}", r"\boxed{7}", r"\boxed{99}", r"\boxed{5}", r"\boxed{1}"]
    seeds = range(6)
    fused_env = _stack(GuessTheNumberEnv, limit, game_turns, format_error)
    fused = _play(fused_env, actions, seeds)
    plain = _play(_stack(_UnfusedGuess, limit, game_turns, format_error), actions, seeds)
    assert [repr(x) for x in fused] == [repr(x).replace("_UnfusedGuess", "GuessTheNumberEnv") for x in plain]
    assert any(entry[0] == "refused" for entry in fused), "no episode ended before the actions ran out"
    # With equal limits even TimeLimit hands over; otherwise only OrderEnforcing does, once
    # the checker has seen an episode of the game end (which a shorter TimeLimit prevents).
    assert (fused_env.step == fused_env.unwrapped.step) is (limit == game_turns)
    assert (fused_env.env.step == fused_env.unwrapped.step) is (limit >= game_turns)


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0-random"])
def test_make_stack_of_a_game_costs_no_frame_per_step_once_checked(env_id):
    env = gem_core.make(env_id)
    env.reset(seed=0)
    while not any(env.step(r"\boxed{0}")[2:4]):  # an invalid guess; the episode ends by the limit
        pass
    env.reset(seed=1)
    assert env.step == env.unwrapped.step, "make()'s layers still run a Python frame per step"
    with pytest.raises(ResetNeeded, match=r"step\(\) called after the episode of .* ended"):
        while True:
            env.step("no box")  # a format error ends the episode; the next step is refused
    turns = env.unwrapped.turn
    assert env.get_wrapper_attr("elapsed_turns") == turns if env_id.endswith("easy") else turns == 1


@pytest.mark.parametrize("close", ["outer", "order-enforcing"])
def test_a_handed_over_stack_refuses_steps_after_close(close):
    env = gem_core.make("game:GuessTheNumber-v0-easy")
    for seed in range(3):  # the hand-over happens at a reset once the checker is done
        env.reset(seed=seed)
        env.step("no box")
    env.reset(seed=3)
    (env if close == "outer" else find_layer(env, OrderEnforcing)).close()
    with pytest.raises(ClosedEnvError, match=r"step\(\) called on closed env"):
        env.step(r"\boxed{5}")
    with pytest.raises(ClosedEnvError, match=r"reset\(\) called on closed env"):
        env.reset()


def test_time_limit_max_turns_set_mid_episode_applies_to_a_handed_over_stack():
    env = gem_core.make("game:GuessTheNumber-v0-hard")  # 7 turns
    for seed in range(3):
        env.reset(seed=seed)
        env.step("no box")
    env.reset(seed=3)
    env.step(r"\boxed{0}")
    env.set_wrapper_attr("max_turns", 2)
    result = env.step(r"\boxed{0}")
    assert (result[3], result[4]["turn"], env.get_wrapper_attr("elapsed_turns")) == (True, 2, 2)
    with pytest.raises(ResetNeeded, match=r"step\(\) called after the episode of .* ended"):
        env.step(r"\boxed{0}")
    with pytest.raises(InvalidArgument, match="max_turns must be a positive int, got 0"):
        env.set_wrapper_attr("max_turns", 0)


def test_a_time_limit_over_a_handed_over_stack_with_a_layer_between_still_ends_the_episode():
    inner = OrderEnforcing(GuessTheNumberEnv(min_number=1, max_number=10, max_turns=9))
    inner.reset(seed=0)  # hands its check to the game
    env = TimeLimit(PassiveEnvChecker(inner), max_turns=2)
    env.reset(seed=1)
    env.step(r"\boxed{0}")
    assert env.step(r"\boxed{0}")[3] is True
    with pytest.raises(ResetNeeded, match=r"step\(\) called after the episode of .* ended"):
        env.step(r"\boxed{0}")
    assert env.unwrapped.turn == 2, "the truncated episode was stepped again"


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
