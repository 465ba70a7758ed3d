"""Vector-env semantics, run on both `SyncVectorEnv` and `AsyncVectorEnv`."""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.errors import ClosedEnvError, InvalidArgument, ResetNeeded, WorkerError
from gem_core.vector import AutoresetMode
from tests.testing_env import GenericTestEnv, raising_step, short_step
from tests.vector.conftest import generic

pytestmark = pytest.mark.timeout(60)


def _check_types(result, n):
    obs, rewards, terminated, truncated, infos = result
    assert isinstance(obs, list) and len(obs) == n
    assert rewards.dtype == np.float64 and rewards.shape == (n,)
    assert terminated.dtype == np.bool_ and terminated.shape == (n,)
    assert truncated.dtype == np.bool_ and truncated.shape == (n,)
    assert isinstance(infos, list) and len(infos) == n and all(isinstance(i, dict) for i in infos)


# ------------------------------------------------------------------------ autoreset scripts


def test_next_step_script(build):
    vec = build([generic(2), generic(3)])
    obs, infos = vec.reset(seed=0)
    assert [o.startswith("start ") for o in obs] == [True, True]
    assert infos == [{}, {}]

    result = vec.step(["a", "b"])
    _check_types(result, 2)
    obs, rewards, terminated, truncated, infos = result
    assert obs == ["obs 1", "obs 1"]
    assert rewards.tolist() == [1.0, 1.0]
    assert infos[0]["action"] == "a" and infos[1]["action"] == "b"

    obs, rewards, terminated, truncated, infos = vec.step(["c", "d"])
    assert obs == ["obs 2", "obs 2"]
    assert terminated.tolist() == [True, False] and truncated.tolist() == [False, False]
    assert infos[0]["success"] is True

    # Sub-env 0 ended: its action is ignored and it is reset; the step reports the reset.
    obs, rewards, terminated, truncated, infos = vec.step(["ignored", "e"])
    assert obs[0].startswith("start ") and obs[1] == "obs 3"
    assert rewards.tolist() == [0.0, 3.0]
    assert terminated.tolist() == [False, True] and truncated.tolist() == [False, False]
    assert infos[0] == {}  # the reset info: the ignored action never reached the env

    obs, rewards, terminated, truncated, infos = vec.step(["f", "ignored"])
    assert obs[0] == "obs 1" and obs[1].startswith("start ")
    assert rewards.tolist() == [1.0, 0.0]
    assert not terminated.any() and not truncated.any()


def test_same_step_script(build):
    vec = build([generic(2), generic(3)], autoreset_mode=AutoresetMode.SAME_STEP)
    vec.reset(seed=0)
    vec.step(["a", "b"])
    obs, rewards, terminated, truncated, infos = vec.step(["c", "d"])
    # Sub-env 0 ended and was reset in the same step.
    assert obs[0].startswith("start ") and obs[1] == "obs 2"
    assert rewards.tolist() == [2.0, 2.0]
    assert terminated.tolist() == [True, False]
    assert infos[0]["final_obs"] == "obs 2"
    assert infos[0]["final_info"] == {"action": "c", "success": True}
    assert "final_obs" not in infos[1]

    obs, rewards, terminated, truncated, infos = vec.step(["e", "f"])
    assert obs[0] == "obs 1"  # no step is spent on the reset
    assert obs[1].startswith("start ") and infos[1]["final_obs"] == "obs 3"
    assert rewards.tolist() == [1.0, 3.0]
    assert terminated.tolist() == [False, True]


def test_same_step_final_obs_is_the_reset_obs_of_that_seed(build):
    vec = build([generic(1)], autoreset_mode="same_step")
    vec.reset(seed=3)
    obs, *_ = vec.step(["a"])
    assert obs[0].startswith("start ")
    assert vec.step(["b"])[4][0]["final_obs"] == "obs 1"


def test_disabled_script(build):
    vec = build([generic(2), generic(4)], autoreset_mode=AutoresetMode.DISABLED)
    vec.reset(seed=0)
    vec.step(["a", "b"])
    obs, rewards, terminated, truncated, infos = vec.step(["c", "d"])
    assert terminated.tolist() == [True, False]

    # Stepping the ended sub-env raises before anything moves.
    with pytest.raises(ResetNeeded, match=r"sub-env\(s\) \[0\].*DISABLED.*reset_mask.*Nothing was stepped"):
        vec.step(["e", "f"])
    with pytest.raises(ResetNeeded, match=r"\[0\]"):
        vec.step({0: "e"})
    obs, rewards, *_ = vec.step({1: "f"})  # the live one can still act alone
    assert obs == [None, "obs 3"] and rewards.tolist() == [0.0, 3.0]

    obs, infos = vec.reset(options={"reset_mask": [True, False]})
    assert obs[0].startswith("start ") and obs[1] is None
    assert infos == [{}, {}]
    obs, rewards, terminated, *_ = vec.step(["g", "h"])
    assert obs == ["obs 1", "obs 4"]
    assert terminated.tolist() == [False, True]


def test_disabled_with_make_stack_pays_nothing_after_the_end(build):
    import functools

    import gem_core

    vec = build(
        [functools.partial(gem_core.make, "toy:Echo-v0", max_turns=1)] * 2,
        autoreset_mode=AutoresetMode.DISABLED,
    )
    vec.reset(seed=0)
    _, _, _, truncated, _ = vec.step(["x", "y"])
    assert truncated.tolist() == [True, True]
    with pytest.raises(ResetNeeded, match=r"\[0, 1\]"):
        vec.step(["x", "y"])


def test_reset_mask_works_in_every_mode(build, kind):
    for mode in AutoresetMode:
        vec = build([generic(5), generic(5)], autoreset_mode=mode)
        vec.reset(seed=1)
        vec.step(["a", "b"])
        obs, infos = vec.reset(options={"reset_mask": np.array([False, True])})
        assert obs[0] is None and obs[1].startswith("start ")
        obs, *_ = vec.step(["c", "d"])
        assert obs == ["obs 2", "obs 1"]


def test_reset_options_reach_sub_envs(build):
    vec = build([generic(2, reset_fn=_echo_options)] * 2)
    obs, _ = vec.reset(options={"level": 3})
    assert obs == ["options {'level': 3}"] * 2
    obs, _ = vec.reset(options={"reset_mask": [True, True]})
    assert obs == ["options None"] * 2


def _echo_options(env, seed, options):
    env.t = 0
    return f"options {options}", {}


# ------------------------------------------------------------------------------- seeding


def test_int_seed_expands_to_consecutive_seeds(build):
    vec = build([generic()] * 3)
    obs, _ = vec.reset(seed=7)
    expected = [GenericTestEnv().reset(seed=s)[0] for s in (7, 8, 9)]
    assert obs == expected
    assert len(set(obs)) == 3


def test_same_seed_same_observations(build):
    vec = build([generic()] * 4)
    first, _ = vec.reset(seed=123)
    vec.step(["a"] * 4)
    again, _ = vec.reset(seed=123)
    assert first == again
    other, _ = vec.reset(seed=124)
    assert other != first
    assert other[:3] == first[1:]  # seed 124 + i == seed 123 + (i + 1)


def test_seed_list_one_per_env(build):
    vec = build([generic()] * 3)
    obs, _ = vec.reset(seed=[5, None, 9])
    assert obs[0] == GenericTestEnv().reset(seed=5)[0]
    assert obs[2] == GenericTestEnv().reset(seed=9)[0]
    obs_mask, _ = vec.reset(seed=[1, 2, 3], options={"reset_mask": [False, False, True]})
    assert obs_mask == [None, None, GenericTestEnv().reset(seed=3)[0]]


def test_unseeded_resets_differ(build):
    vec = build([generic()] * 2)
    a, _ = vec.reset()
    b, _ = vec.reset()
    assert a != b


# ---------------------------------------------------------------------------- partial steps


def test_partial_step_entries_and_consistency(build):
    vec = build([generic(3)] * 3)
    vec.reset(seed=0)
    result = vec.step({1: "x"})
    _check_types(result, 3)
    obs, rewards, terminated, truncated, infos = result
    assert obs == [None, "obs 1", None]
    assert rewards.tolist() == [0.0, 1.0, 0.0]
    assert not terminated.any() and not truncated.any()
    assert infos[0] == {} and infos[2] == {} and infos[1]["action"] == "x"
    assert infos[0] is not infos[2]

    obs, *_ = vec.step({np.int64(2): "y", 0: "z"})
    assert obs == ["obs 1", None, "obs 1"]
    obs, *_ = vec.step(["a", "b", "c"])
    assert obs == ["obs 2", "obs 2", "obs 2"]
    obs, *_ = vec.step({})
    assert obs == [None, None, None]


def test_partial_step_autoresets_an_ended_env_when_next_stepped(build):
    vec = build([generic(1), generic(5)])
    vec.reset(seed=0)
    _, _, terminated, _, _ = vec.step(["a", "b"])
    assert terminated.tolist() == [True, False]
    obs, *_ = vec.step({1: "c"})  # sub-env 0 left out: still waiting for its reset
    assert obs == [None, "obs 2"]
    obs, rewards, terminated, truncated, infos = vec.step({0: "ignored"})
    assert obs[0].startswith("start ") and rewards[0] == 0.0 and not terminated[0]


def test_full_step_accepts_tuples_and_arrays(build):
    vec = build([generic()] * 2)
    vec.reset(seed=0)
    assert vec.step(("a", "b"))[0] == ["obs 1", "obs 1"]
    assert vec.step(np.array(["a", "b"]))[0] == ["obs 2", "obs 2"]


# ------------------------------------------------------------------------------- bad input


def test_wrong_number_of_actions(build):
    vec = build([generic()] * 3)
    vec.reset()
    with pytest.raises(InvalidArgument, match=r"got 2 actions for 3 sub-envs.*dict \{index: action\}"):
        vec.step(["a", "b"])
    with pytest.raises(InvalidArgument, match="got 4 actions for 3 sub-envs"):
        vec.step(["a"] * 4)
    obs, *_ = vec.step(["a"] * 3)  # nothing was stepped by the failed calls
    assert obs == ["obs 1"] * 3


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ({3: "a"}, r"index 3, out of range for 3 sub-envs; indices must be in \[0, 2\]"),
        ({-1: "a"}, "index -1, out of range"),
        ({"0": "a"}, r"dict key '0' \(str\).*int indices"),
        ({True: "a"}, r"dict key True \(bool\)"),
        ("abc", "got str; wrap a single action in a list"),
        (None, r"expects a list of 3 actions or a dict \{index: action\}, got NoneType"),
    ],
)
def test_bad_actions(build, actions, message):
    vec = build([generic()] * 3)
    vec.reset()
    with pytest.raises(InvalidArgument, match=message):
        vec.step(actions)


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ([1, 2], r"got a list of 2 seeds for 3 sub-envs"),
        (-1, "non-negative int.*got -1"),
        ("7", "got '7'"),
        ([1, 2, -3], "got -3 at position 2"),
    ],
)
def test_bad_seeds(build, seed, message):
    vec = build([generic()] * 3)
    with pytest.raises(InvalidArgument, match=message):
        vec.reset(seed=seed)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reset_mask": [True]}, r"reset_mask'\] has length 1 but there are 2 sub-envs"),
        ({"reset_mask": [1, 0]}, r"must hold bools, got 1 at position 0"),
        ({"reset_mask": "yes"}, "must be a list or bool array of length 2, got str"),
        ("mask", "options=...\\) expects a dict or None, got str"),
    ],
)
def test_bad_reset_options(build, options, message):
    vec = build([generic()] * 2)
    with pytest.raises(InvalidArgument, match=message):
        vec.reset(options=options)


def test_step_before_reset(build):
    vec = build([generic()] * 2)
    with pytest.raises(ResetNeeded, match=r"step\(\) called before reset\(\)"):
        vec.step(["a", "b"])


def test_closed_vector_env(build):
    vec = build([generic()] * 2)
    vec.reset()
    vec.close()
    vec.close()  # safe twice
    assert vec.closed
    with pytest.raises(ClosedEnvError, match=r"step\(\) called on .*closed.*build a new vector env"):
        vec.step(["a", "b"])
    with pytest.raises(ClosedEnvError, match=r"reset\(\)"):
        vec.reset()
    with pytest.raises(ClosedEnvError):
        vec.get_attr("t")
    assert "closed" in repr(vec)


@pytest.mark.parametrize(
    ("env_fns", "message"),
    [
        ([], "at least one env factory"),
        ("toy:Echo-v0", "expects a list of env factories.*make_vec"),
        ([GenericTestEnv()], r"env_fns\[0\] is an Env instance.*pass a callable"),
        ([generic(), 3], r"env_fns\[1\] must be a callable"),
    ],
)
def test_bad_env_fns(kind, env_fns, message):
    from gem_core.vector import AsyncVectorEnv, SyncVectorEnv

    cls = SyncVectorEnv if kind == "sync" else AsyncVectorEnv
    with pytest.raises(InvalidArgument, match=message):
        cls(env_fns)


def test_factory_must_return_an_env(build, kind):
    exc = InvalidArgument if kind == "sync" else (InvalidArgument, WorkerError)
    with pytest.raises(exc, match=r"env_fns\[1\] returned int, not a gem_core.Env"):
        build([generic(), int])


def test_bad_autoreset_mode(build):
    with pytest.raises(InvalidArgument, match=r"autoreset_mode must be one of AutoresetMode.NEXT_STEP.*got 'sometimes'"):
        build([generic()], autoreset_mode="sometimes")


# ------------------------------------------------------------------------ sub-env failures


def test_raising_sub_env_is_reported_and_others_step(build, kind):
    vec = build([generic(3, step_fn=raising_step), generic(3), generic(3)])
    vec.reset(seed=0)
    obs, rewards, terminated, truncated, infos = vec.step(["boom", "a", "b"])
    assert obs == [None, "obs 1", "obs 1"]
    assert rewards.tolist() == [0.0, 1.0, 1.0]
    assert terminated.tolist() == [False, False, False]
    assert truncated.tolist() == [True, False, False]
    error = infos[0]["error"]
    assert isinstance(error, WorkerError)
    assert error.index == 0 and error.exc_type == "ValueError"
    assert error.remote_message == "boom requested"
    assert "raising_step" in error.remote_traceback
    assert "sub-env 0 raised ValueError in step(): boom requested" in str(error)
    assert "error" not in infos[1]

    # The failed episode ended: the next step resets sub-env 0; the others go on.
    obs, rewards, terminated, truncated, infos = vec.step(["a", "b", "c"])
    assert obs[0].startswith("start ") and obs[1:] == ["obs 2", "obs 2"]
    assert not truncated.any()
    obs, *_ = vec.step(["a", "b", "c"])
    assert obs == ["obs 1", "obs 3", "obs 3"]


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_a_malformed_step_result_fails_that_sub_env_only(build, mode):
    vec = build([generic(3), generic(3, step_fn=short_step), generic(3)], autoreset_mode=mode)
    vec.reset(seed=0)
    obs, rewards, terminated, truncated, infos = vec.step(["a", "short", "a"])
    assert obs[0] == obs[2] == "obs 1" and truncated.tolist() == [False, True, False]
    assert isinstance(infos[1]["error"], WorkerError) and infos[1]["error"].exc_type == "ValueError"
    assert rewards.tolist()[1] == 0.0 and not terminated.any()
    vec.reset(seed=0)
    obs, rewards, *_ = vec.step(["a", "lazy", "a"])  # any 5-item iterable is a step result
    assert obs == ["obs 1"] * 3 and rewards.tolist() == [1.0] * 3


def test_raising_sub_env_same_step(build):
    vec = build([generic(3, step_fn=raising_step), generic(3)], autoreset_mode="same_step")
    vec.reset(seed=0)
    obs, rewards, terminated, truncated, infos = vec.step(["boom", "a"])
    assert obs[0].startswith("start ") and obs[1] == "obs 1"
    assert truncated.tolist() == [True, False]
    assert infos[0]["final_obs"] is None
    assert isinstance(infos[0]["final_info"]["error"], WorkerError)
    assert infos[0]["error"] is infos[0]["final_info"]["error"]
    obs, *_ = vec.step(["a", "b"])
    assert obs == ["obs 1", "obs 2"]


def test_raising_sub_env_disabled_needs_a_masked_reset(build):
    vec = build([generic(3, step_fn=raising_step), generic(3)], autoreset_mode="disabled")
    vec.reset(seed=0)
    _, _, _, truncated, infos = vec.step(["boom", "a"])
    assert truncated.tolist() == [True, False] and "error" in infos[0]
    with pytest.raises(ResetNeeded, match=r"\[0\]"):
        vec.step(["a", "b"])
    vec.reset(options={"reset_mask": [True, False]})
    assert vec.step(["a", "b"])[0] == ["obs 1", "obs 2"]


def test_on_error_raise_completes_the_step_then_raises(build):
    vec = build([generic(3), generic(3, step_fn=raising_step), generic(3)], on_error="raise")
    vec.reset(seed=0)
    with pytest.raises(WorkerError, match="sub-env 1 raised ValueError in step") as excinfo:
        vec.step(["a", "boom", "b"])
    assert excinfo.value.index == 1
    # Every other sub-env was stepped exactly once: the vector env stays consistent.
    obs, *_ = vec.step(["a", "x", "b"])
    assert obs[0] == "obs 2" and obs[1].startswith("start ") and obs[2] == "obs 2"


def test_raising_reset_is_reported(build):
    vec = build([generic(reset_fn=_failing_reset), generic()])
    obs, infos = vec.reset(seed=0)
    assert obs[0] is None and obs[1].startswith("start ")
    assert infos[0]["error"].exc_type == "RuntimeError"
    assert "in reset(): no reset for you" in str(infos[0]["error"])
    # The failed sub-env is retried by the autoreset on its next step.
    obs, rewards, terminated, truncated, infos = vec.step(["a", "b"])
    assert obs[0] is None and truncated.tolist() == [True, False] and "error" in infos[0]


def _failing_reset(env, seed, options):
    raise RuntimeError("no reset for you")


def test_bad_on_error(build):
    with pytest.raises(InvalidArgument, match="on_error must be 'report' or 'raise', got 'ignore'"):
        build([generic()], on_error="ignore")


# --------------------------------------------------------------------- call, get_attr, misc


def test_call_and_get_attr(build):
    vec = build([generic(2), generic(5)])
    vec.reset(seed=0)
    assert vec.get_attr("episode_len") == [2, 5]
    actions = vec.call("sample_random_action")
    assert len(actions) == 2 and all(a.startswith("a") for a in actions)
    assert vec.call("episode_len") == [2, 5]  # not callable: returned as is
    with pytest.raises(WorkerError, match=r"get_attr\('nope'\) failed on sub-env 0: AttributeError") as excinfo:
        vec.get_attr("nope")
    assert excinfo.value.index == 0


def test_len_repr_and_context_manager(build, kind):
    with build([generic()] * 3) as vec:
        assert len(vec) == 3 == vec.num_envs
        assert "GenericTestEnv" in repr(vec) and "num_envs=3" in repr(vec)
        assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert vec.closed


def test_sync_exposes_envs():
    from gem_core.vector import SyncVectorEnv

    vec = SyncVectorEnv([generic(2), generic(4)])
    assert [e.episode_len for e in vec.envs] == [2, 4]
    vec.close()
    assert all(e.closed == 1 for e in vec.envs)
    vec.close()
    assert all(e.closed == 1 for e in vec.envs)


# -------------------------------------------------------------- sync and async agree exactly


def _script(rng, n):
    """A random sequence of full steps, partial steps and (masked) resets."""
    ops = [("reset", {"seed": int(rng.integers(0, 1000))})]
    for _ in range(40):
        r = rng.random()
        if r < 0.6:
            ops.append(("step", [("boom" if rng.random() < 0.05 else f"a{k}") for k in range(n)]))
        elif r < 0.85:
            keys = rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)
            ops.append(("step", {int(k): f"p{k}" for k in keys}))
        else:
            mask = [bool(b) for b in rng.random(n) < 0.5]
            ops.append(("reset", {"seed": int(rng.integers(0, 1000)), "options": {"reset_mask": mask}}))
    return ops


def _normalize(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, WorkerError):
        return ("WorkerError", value.index, value.exc_type, value.remote_message)
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def _run_script(vec, ops):
    out = []
    for op, arg in ops:
        try:
            result = vec.reset(**arg) if op == "reset" else vec.step(arg)
        except ResetNeeded as e:
            result = ("ResetNeeded", str(e))
        out.append(_normalize(result))
    return out


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_sync_and_async_agree(mode):
    from gem_core.vector import AsyncVectorEnv, SyncVectorEnv

    fns = [generic(1 + k % 3, step_fn=raising_step) for k in range(5)]
    rng = np.random.default_rng(list(AutoresetMode).index(mode))
    ops = _script(rng, 5)
    sync = SyncVectorEnv(fns, autoreset_mode=mode)
    async_ = AsyncVectorEnv(fns, autoreset_mode=mode, num_workers=2, timeout=20)
    try:
        assert _run_script(sync, ops) == _run_script(async_, ops)
    finally:
        sync.close()
        async_.close()
