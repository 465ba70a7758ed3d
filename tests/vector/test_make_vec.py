"""`make_vec`: ids, per-env kwargs, seeds, wrappers and its argument checks."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.core import Wrapper
from gem_core.errors import InvalidArgument, InvalidKwarg, NameNotFound
from gem_core.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, make_vec
from gem_core.wrappers.common import OrderEnforcing, TimeLimit

pytestmark = pytest.mark.timeout(60)


class Shout(Wrapper):
    """Upper-cases observations (a picklable wrapper for the tests)."""

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs.upper(), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs.upper(), reward, terminated, truncated, info


@pytest.fixture(params=["sync", "async"])
def mode(request):
    return request.param


def _make(mode, *args, **kwargs):
    if mode == "async":
        kwargs.setdefault("timeout", 20.0)
    return make_vec(*args, vectorization_mode=mode, **kwargs)


def test_make_vec_builds_the_make_stack(mode):
    with _make(mode, "toy:Echo-v0", 3) as vec:
        assert isinstance(vec, SyncVectorEnv if mode == "sync" else AsyncVectorEnv)
        assert vec.num_envs == 3 and vec.autoreset_mode is AutoresetMode.NEXT_STEP
        assert vec.get_attr("max_turns") == [4, 4, 4]  # TimeLimit from the spec
        assert "toy:Echo-v0" in repr(vec)
    if mode == "sync":
        with make_vec("toy:Echo-v0", 1) as vec:
            assert isinstance(vec.envs[0], TimeLimit)
            assert isinstance(vec.envs[0].env, OrderEnforcing)


def test_make_vec_lists_of_ids_and_kwargs(mode):
    ids = ["toy:Echo-v0", "toy:PrimeCount-v0"]
    with _make(mode, ids, env_kwargs=[{"word_length": 3}, {"max_n": 100}]) as vec:
        assert vec.num_envs == 2
        assert vec.get_attr("max_turns") == [4, 8]
        assert vec.call("unwrapped")[0].word_length == 3
        obs, _ = vec.reset(seed=0)
        assert "word" in obs[0] and "prime" in obs[1]


def test_make_vec_kwargs_for_all_and_max_turns(mode):
    with _make(mode, "toy:Echo-v0", 2, env_kwargs={"word_length": 2, "max_turns": 1}) as vec:
        vec.reset(seed=0)
        _, _, _, truncated, _ = vec.step(["zzz", "zzz"])
        assert truncated.tolist() == [True, True]
        assert [len(w) for w in vec.get_attr("word")] == [2, 2]


def test_make_vec_seed_is_used_by_the_first_reset(mode):
    with _make(mode, "toy:Echo-v0", 3, seed=10) as vec, make_vec("toy:Echo-v0", 3) as ref:
        first, _ = vec.reset()
        assert first == ref.reset(seed=10)[0]
        second, _ = vec.reset()  # later resets are not re-seeded
        assert second != first
        assert vec.reset(seed=11)[0][:2] == first[1:]


def test_make_vec_seed_list(mode):
    with _make(mode, "toy:Echo-v0", 2, seed=[4, 2]) as vec, make_vec("toy:Echo-v0", 2) as ref:
        assert vec.reset()[0] == ref.reset(seed=[4, 2])[0]


def test_make_vec_wrappers(mode):
    with _make(mode, "toy:Echo-v0", 2, wrappers=[Shout]) as vec:
        obs, _ = vec.reset(seed=0)
        assert all(o.startswith("REPLY WITH") for o in obs)


def test_make_vec_autoreset_mode_by_name(mode):
    with _make(mode, "toy:Echo-v0", 2, autoreset_mode="SAME_STEP") as vec:
        assert vec.autoreset_mode is AutoresetMode.SAME_STEP


def test_make_vec_async_options():
    with make_vec("toy:Echo-v0", 4, vectorization_mode="async", num_workers=1, timeout=20) as vec:
        assert vec.num_workers == 1 and vec.timeout == 20


def test_gem_core_exposes_make_vec_and_autoreset_mode():
    assert gem_core.make_vec is make_vec
    assert gem_core.AutoresetMode is AutoresetMode


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((["toy:Echo-v0"] * 2, 3), {}, "make_vec got 2 env ids for num_envs=3; pass exactly one id per sub-env"),
        (("toy:Echo-v0", 3), {"env_kwargs": [{}, {}]}, "got 2 env_kwargs dicts for num_envs=3; pass one dict per sub-env"),
        (("toy:Echo-v0", 2), {"env_kwargs": [{}, 1]}, r"env_kwargs\[1\] must be a dict, got int"),
        (("toy:Echo-v0", 2), {"env_kwargs": "x"}, "env_kwargs must be a dict or a list of dicts, got str"),
        (("toy:Echo-v0", 3), {"seed": [1, 2]}, r"make_vec\(seed=...\) got a list of 2 seeds for 3 sub-envs"),
        (("toy:Echo-v0", 0), {}, "num_envs must be a positive int, got 0"),
        (("toy:Echo-v0", True), {}, "num_envs must be a positive int, got True"),
        (("toy:Echo-v0", 2), {"vectorization_mode": "threads"}, "vectorization_mode must be 'sync', 'async' or 'ray', got 'threads'"),
        (("toy:Echo-v0", 2), {"num_workers": 2}, r"vectorization_mode='sync'\) got unknown option\(s\) 'num_workers'; it accepts on_error"),
        (("toy:Echo-v0", 2), {"word_length": 2}, r"unknown option\(s\) 'word_length'.*env_kwargs=\{...\}"),
        (("toy:Echo-v0", 2), {"wrappers": Shout}, "wrappers must be a list of callables"),
        (("toy:Echo-v0", 2), {"autoreset_mode": "never"}, "autoreset_mode must be one of"),
    ],
)
def test_make_vec_bad_input(args, kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        make_vec(*args, **kwargs)


def test_make_vec_unknown_id_has_suggestions():
    with pytest.raises(NameNotFound, match="Did you mean: toy:Echo-v0"):
        make_vec("toy:Ecko-v0", 2)
    with pytest.raises(NameNotFound):
        make_vec(["toy:Echo-v0", "toy:Nope-v0"], 2, vectorization_mode="async")


def test_make_vec_unknown_kwarg_names_env_and_kwarg(mode):
    with pytest.raises(InvalidKwarg, match=r"env 'toy:Echo-v0' got unknown keyword argument\(s\) 'word_len'.*did you mean 'word_length'"):
        _make(mode, "toy:Echo-v0", 2, env_kwargs={"word_len": 3})


def test_make_vec_full_episode_on_cheap_env(mode):
    """A realistic loop: random actions, episodes end by success or the turn limit."""
    with _make(mode, "toy:Echo-v0", 4, seed=0) as vec:
        obs, _ = vec.reset()
        ended = 0
        for _ in range(20):
            actions = vec.call("sample_random_action")
            obs, rewards, terminated, truncated, infos = vec.step(actions)
            ended += int(terminated.sum() + truncated.sum())
            for i in range(4):
                if terminated[i]:
                    assert rewards[i] == 1.0 and infos[i]["success"] is True
        assert ended > 0
