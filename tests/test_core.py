"""Tests for gem_core.core: the Env contract, explicit attribute access, one-hook wrappers."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import gem_core
from gem_core import ActionWrapper, Env, ObservationWrapper, RewardWrapper, Wrapper
from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.registration import EnvSpec
from tests.testing_env import GenericTestEnv


def _draws(env: Env) -> tuple[float, float]:
    return env.rng.random(), float(env.np_random.random())


# --- seeding -------------------------------------------------------------------------
def test_reset_seed_gives_the_same_generators():
    env = GenericTestEnv()
    env.reset(seed=3)
    first = _draws(env)
    env.reset(seed=3)
    assert _draws(env) == first
    env.reset(seed=4)
    assert _draws(env) != first


def test_reset_without_seed_continues_the_generators():
    env = GenericTestEnv()
    env.reset(seed=3)
    first = _draws(env)
    env.reset()
    assert _draws(env) != first
    assert env.np_random_seed == 3


def test_two_envs_with_one_seed_agree_and_do_not_share_state():
    a, b = GenericTestEnv(), GenericTestEnv()
    a.reset(seed=11)
    b.reset(seed=11)
    assert a.rng is not b.rng
    assert _draws(a) == _draws(b)


def test_an_unseeded_env_gets_its_own_entropy():
    a, b = GenericTestEnv(), GenericTestEnv()
    assert _draws(a) != _draws(b)
    assert isinstance(a.np_random_seed, int) and a.np_random_seed >= 0


def test_env_never_touches_the_global_random_state():
    random.seed(0)
    np.random.seed(0)
    py_before, np_before = random.getstate(), np.random.get_state()[1].copy()
    env = gem_core.make("toy:Echo-v0")
    for seed in (None, 1, 2):
        env.reset(seed=seed)
        env.step(env.sample_random_action())
        env.unwrapped.np_random.integers(10)
    assert random.getstate() == py_before, "an env changed the global `random` state"
    assert np.array_equal(np.random.get_state()[1], np_before), (
        "an env changed numpy's global state"
    )


def test_assigning_a_generator_marks_the_seed_unknown():
    env = GenericTestEnv()
    env.np_random = np.random.default_rng(0)
    assert env.np_random_seed == -1
    env.rng = random.Random(1)
    assert env.rng.random() == random.Random(1).random()


def test_a_bad_seed_is_rejected_at_reset():
    with pytest.raises(InvalidArgument, match="seed must be a non-negative int or None, got -1"):
        GenericTestEnv().reset(seed=-1)


def test_a_seeded_episode_does_not_import_numpy():
    # The numpy generator is built on first use: envs that only use self.rng stay cheap.
    code = (
        "import sys, gem_core\n"
        "env = gem_core.make('toy:Echo-v0')\n"
        "env.reset(seed=1); env.step('abc'); env.reset(seed=2)\n"
        "print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", "a seeded reset/step imported numpy"


_EPISODE_SCRIPT = (
    "import json, gem_core\n"
    "env = gem_core.make('toy:Echo-v0')\n"
    "obs, _ = env.reset(seed=2024)\n"
    "steps = [env.step(a)[:4] for a in ('abc', 'de')]\n"
    "env.unwrapped.np_random.random()\n"
    "print(json.dumps([obs, steps, env.unwrapped.np_random.random()]))"
)


def test_same_seed_same_episode_in_another_process():
    runs = []
    for hash_seed in ("1", "999"):
        out = subprocess.run(
            [sys.executable, "-c", _EPISODE_SCRIPT],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        runs.append(json.loads(out.stdout))
    local: dict = {}
    exec(_EPISODE_SCRIPT.replace("print(", "result = ("), local)
    assert runs[0] == runs[1] == json.loads(local["result"])
    assert runs[0][0].startswith("Reply with exactly this word")


# --- the base class ------------------------------------------------------------------
def test_base_env_defaults():
    env = Env()
    assert env.reset(seed=1) == (None, {})
    with pytest.raises(NotImplementedError, match="Env must implement step"):
        env.step("a")
    with pytest.raises(NotImplementedError, match="Env does not implement sample_random_action"):
        env.sample_random_action()
    assert env.state_summary() is None
    assert env.unwrapped is env
    env.close()
    env.close()


def test_str_names_the_class_and_spec():
    env = GenericTestEnv()
    assert str(env) == "<GenericTestEnv instance>"
    env.spec = EnvSpec("test:Thing-v0", entry_point=GenericTestEnv)
    assert repr(env) == "<GenericTestEnv<test:Thing-v0>>"
    assert str(Wrapper(env)) == "<Wrapper<GenericTestEnv<test:Thing-v0>>>"


def test_context_manager_closes():
    with GenericTestEnv() as env:
        env.reset()
    assert env.closed == 1


# --- wrappers: explicit attribute access ----------------------------------------------
def _stack() -> tuple[Wrapper, GenericTestEnv]:
    base = GenericTestEnv()
    base.secret = "inner"
    return Wrapper(Wrapper(base)), base


def test_wrapper_rejects_a_non_env():
    with pytest.raises(TypeError, match="Wrapper expects a gem_core.Env to wrap, got dict") as caught:
        Wrapper({})  # type: ignore[arg-type]
    assert isinstance(caught.value, InvalidArgumentType)


def test_wrapper_does_not_forward_attributes_and_says_how():
    env, _ = _stack()
    with pytest.raises(AttributeError) as info:
        _ = env.secret
    assert str(info.value) == (
        "Wrapper has no attribute 'secret'; wrappers do not forward attributes. "
        "Use env.get_wrapper_attr('secret') or env.unwrapped.secret."
    )


def test_wrapping_copies_nothing():
    env, base = _stack()
    assert "secret" not in vars(env) and "secret" not in vars(env.env)
    base.secret = "changed"
    assert env.get_wrapper_attr("secret") == "changed"


def test_get_wrapper_attr_searches_outside_in():
    env, base = _stack()
    env.env.secret = "middle"
    assert env.get_wrapper_attr("secret") == "middle"
    assert env.unwrapped.secret == "inner"
    assert env.has_wrapper_attr("secret") and not env.has_wrapper_attr("missing")


def test_get_wrapper_attr_missing_names_the_stack():
    env, _ = _stack()
    with pytest.raises(
        AttributeError,
        match=r"no layer of <Wrapper<Wrapper<GenericTestEnv instance>>> has an attribute 'missing'",
    ):
        env.get_wrapper_attr("missing")


def test_set_wrapper_attr_sets_the_layer_that_has_it():
    env, base = _stack()
    assert env.set_wrapper_attr("secret", "new") is True
    assert base.secret == "new" and "secret" not in vars(env)


def test_set_wrapper_attr_without_force_reports_a_miss():
    env, _ = _stack()
    assert env.set_wrapper_attr("missing", 1, force=False) is False
    assert not env.has_wrapper_attr("missing")
    assert env.set_wrapper_attr("missing", 1) is True
    assert vars(env)["missing"] == 1


def test_set_wrapper_attr_skips_read_only_mirrors():
    # A wrapper's spec/metadata mirror the base env: setting them must reach the base env.
    env, base = _stack()
    new_spec = EnvSpec("test:Other-v0", entry_point=GenericTestEnv)
    assert env.set_wrapper_attr("spec", new_spec) is True
    assert base.spec is new_spec and env.spec is new_spec
    env.set_wrapper_attr("metadata", {"category": "test"})
    assert env.metadata == {"category": "test"} and base.metadata == {"category": "test"}


def test_wrapper_generators_are_the_env_generators():
    env, base = _stack()
    env.reset(seed=5)
    assert env.rng is base.rng and env.np_random is base.np_random
    assert env.np_random_seed == 5
    gen = np.random.default_rng(1)
    env.np_random = gen
    assert base.np_random is gen
    rng = random.Random(2)
    env.rng = rng
    assert base.rng is rng


def test_wrapper_passes_methods_through():
    class Summarized(GenericTestEnv):
        def state_summary(self) -> str:
            return f"t={self.t}"

    env = Wrapper(Wrapper(Summarized()))
    env.reset(seed=0)
    env.step("a")
    assert env.state_summary() == "t=1"
    assert env.sample_random_action().startswith("a")
    assert env.unwrapped.t == 1
    env.close()
    assert env.unwrapped.closed == 1


# --- one-hook wrappers ------------------------------------------------------------------
def test_observation_wrapper_changes_reset_and_step_observations():
    class Upper(ObservationWrapper):
        def observation(self, observation):
            return observation.upper()

    env = Upper(GenericTestEnv())
    obs, _ = env.reset(seed=0)
    assert obs.startswith("START ")
    assert env.step("a")[0] == "OBS 1"


def test_action_wrapper_changes_actions():
    class Prefix(ActionWrapper):
        def action(self, action):
            return f"x-{action}"

    env = Prefix(GenericTestEnv())
    env.reset()
    assert env.step("a")[4]["action"] == "x-a"


def test_reward_wrapper_changes_rewards():
    class Double(RewardWrapper):
        def reward(self, reward):
            return 2 * reward

    env = Double(GenericTestEnv())
    env.reset()
    assert env.step("a")[1] == 2.0
    assert env.step("a")[1] == 4.0


@pytest.mark.parametrize(
    ("cls", "call"),
    [
        (ObservationWrapper, lambda env: env.reset()),
        (ActionWrapper, lambda env: env.step("a")),
        (RewardWrapper, lambda env: env.step("a")),
    ],
)
def test_one_hook_wrappers_require_their_hook(cls, call):
    env = cls(GenericTestEnv())
    env.env.reset()
    with pytest.raises(NotImplementedError):
        call(env)


def test_observation_text_is_the_one_rule_for_prompts():
    from gem_core.core import observation_text

    class BrokenStr:
        def __str__(self):
            raise RuntimeError("no")

        def __repr__(self):
            return "<broken>"

    class BrokenBoth:
        def __str__(self):
            raise RuntimeError("no")

        __repr__ = __str__

    assert observation_text("hi") == "hi"
    assert observation_text({"text": "board", "images": [b"png"]}) == "board"
    assert observation_text({"images": [b"png"]}) == observation_text({"text": None, "images": []}) == ""
    assert observation_text({"text": 7}) == "7"
    assert observation_text({"score": 1}) == "{'score': 1}"  # not multimodal: the whole mapping

    class BadMapping(dict):
        def __contains__(self, key):
            raise RuntimeError("no")

        def __repr__(self):
            return "<bad mapping>"

    assert observation_text(BadMapping()) == "<bad mapping>"
    assert observation_text(None) == ""
    assert observation_text(3) == "3"
    assert observation_text(BrokenStr()) == "<broken>"
    assert observation_text(BrokenBoth()) == "<BrokenBoth object with a failing repr>"
