"""Tests for gem_core.checker: check_env on every registered env, and each named check failing."""

from __future__ import annotations

import itertools
import random
import re
import secrets
import warnings

import numpy as np
import pytest

import gem_core
from gem_core import checker
from gem_core.checker import check_env
from gem_core.errors import (
    DependencyNotInstalled,
    EnvCheckError,
    InvalidArgument,
    ResetNeeded,
    install_command,
)
from gem_core.registration import EnvSpec
from gem_core.wrappers import OrderEnforcing, TimeLimit
from tests.testing_env import GenericTestEnv, counting_step


# --- every registered env -------------------------------------------------------------
# The one place check_env runs on registered ids: every id, in `make test`, all 105 rg:*
# included (a reasoning-gym upgrade can break any of them); the family test files do not
# repeat it. Measured on the 2-core CI box: the 105 rg:* ids take about 140 s (rg:knight_swap
# 30 s and rg:futoshiki 26 s the slowest), the 103 other ids about 26 s.
def _registered_ids() -> list[str]:
    return sorted(gem_core.registry)  # at collection time: envs registered later are covered


@pytest.mark.parametrize("env_id", _registered_ids())
def test_check_env_all_registered(env_id, monkeypatch):
    env_spec = gem_core.spec(env_id)
    if not env_spec.offline:  # hub-backed data: check it on the sample shipped with gem-core
        monkeypatch.setenv("GEM_DATA", "sample")
    try:
        env = gem_core.make(env_id)
    except DependencyNotInstalled as e:
        pytest.skip(f"{env_id}: {e}")
    try:
        check_env(env)
    except DependencyNotInstalled as e:
        pytest.skip(f"{env_id}: {e}")
    finally:
        env.close()


def test_the_registry_is_not_empty():
    assert {"toy:Echo-v0", "toy:PrimeCount-v0"} <= set(_registered_ids())


# --- helpers ---------------------------------------------------------------------------
def _made(**kwargs) -> OrderEnforcing:
    """A GenericTestEnv behind the stack `make` builds (minus the passive checker)."""
    return OrderEnforcing(GenericTestEnv(**kwargs))


def _fails(check, env, *, match: str) -> EnvCheckError:
    with pytest.raises(EnvCheckError, match=match) as info:
        check(env, seed=0)
    assert info.value.check == check.__name__
    assert str(info.value).startswith(f"{check.__name__}: ")
    return info.value


def _reset_with(obs_fn):
    def reset_fn(env, seed, options):
        env.t = 0
        return obs_fn(env), {}

    return reset_fn


def _step_with(**overrides):
    """counting_step with some of its return values replaced."""

    def step_fn(env, action):
        obs, reward, terminated, truncated, info = counting_step(env, action)
        values = {
            "obs": obs,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "info": info,
        }
        for key, value in overrides.items():
            values[key] = value(env, values) if callable(value) else value
        return (
            values["obs"],
            values["reward"],
            values["terminated"],
            values["truncated"],
            values["info"],
        )

    return step_fn


# --- check_env itself -------------------------------------------------------------------
def test_check_env_passes_a_good_env_and_returns_none():
    env = _made()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_env(env) is None


def test_check_env_closes_the_env():
    env = _made()
    check_env(env)
    assert env.unwrapped.closed >= 2
    with pytest.raises(gem_core.errors.ClosedEnvError):
        env.reset()


def test_check_env_reports_soft_notes_as_warnings_only_when_asked():
    bare = GenericTestEnv(reset_fn=_reset_with(lambda env: "always the same"), episode_len=2)
    with pytest.warns(UserWarning) as record:
        check_env(bare)
    messages = [str(w.message) for w in record]
    assert (
        "check_env: check_step_after_end: <GenericTestEnv instance> has no OrderEnforcing layer "
        "(not built by gem_core.make); step-after-end enforcement was not checked"
    ) in messages
    assert any(
        m.startswith(
            "check_env: check_seed_variation: 5 seeds and 4 unseeded resets gave identical episodes"
        )
        for m in messages
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(GenericTestEnv(reset_fn=_reset_with(lambda env: "same")), warn=False)


def test_check_env_rejects_non_envs_and_unknown_check_names():
    with pytest.raises(InvalidArgument, match="check_env expects a gem_core.Env, got str"):
        check_env("toy:Echo-v0")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument) as info:
        check_env(_made(), skip=["check_bad_action"])
    assert str(info.value).startswith(
        "check_env(skip=...) got unknown check name(s) 'check_bad_action'. Valid names: check_reset_types, "
    )
    assert str(info.value).endswith("'check_bad_action': did you mean 'check_bad_actions'?")
    with pytest.raises(InvalidArgument, match="max_steps must be a positive int, got 0"):
        check_env(_made(), max_steps=0)


def test_check_env_skip_disables_a_check():
    broken = _made(step_fn=lambda env, action: action.upper() and counting_step(env, action))
    with pytest.raises(EnvCheckError, match="^check_bad_actions: "):
        check_env(broken)
    check_env(
        _made(step_fn=lambda env, action: action.upper() and counting_step(env, action)),
        skip={"check_bad_actions"},
    )


def test_check_env_lets_dependency_not_installed_through():
    def reset_fn(env, seed, options):
        raise DependencyNotInstalled("sympy", extra="math")

    with pytest.raises(DependencyNotInstalled, match=re.escape(install_command("math"))):
        check_env(_made(reset_fn=reset_fn))


def test_env_check_error_is_an_assertion_error():
    with pytest.raises(AssertionError):
        check_env(_made(step_fn=lambda env, action: ("obs", 0.0, False, {})))


def test_checks_are_public_and_uniquely_named():
    names = [c.__name__ for c in checker.CHECKS]
    assert len(set(names)) == len(names) == 11
    assert set(names) <= set(checker.__all__)
    assert names[-1] == "check_close_twice"
    assert gem_core.check_env is check_env


# --- each named check fails on a broken env ---------------------------------------------
def test_check_reset_types_fails_on_a_bare_observation():
    env = GenericTestEnv(reset_fn=lambda env, seed, options: "just the observation")
    _fails(
        checker.check_reset_types,
        env,
        match=r"reset\(\) returned str; expected the tuple \(observation, info\)",
    )


def test_check_reset_types_fails_on_a_none_observation():
    env = GenericTestEnv(reset_fn=lambda env, seed, options: (None, {}))
    _fails(
        checker.check_reset_types,
        env,
        match=r"returned observation None; expected text.*super\(\).reset",
    )


def test_check_reset_types_fails_on_a_non_dict_info():
    env = GenericTestEnv(reset_fn=lambda env, seed, options: ("obs", []))
    _fails(checker.check_reset_types, env, match=r"returned info of type list; expected a dict")


def test_check_reset_types_fails_when_reset_rejects_options():
    class NoOptions(GenericTestEnv):
        def reset(self, *, seed=None):  # type: ignore[override]
            return super().reset(seed=seed)

    _fails(
        checker.check_reset_types,
        NoOptions(),
        match=r"reset\(seed=\.\.\., options=\{\}\) raised TypeError",
    )


def test_check_reset_types_notes_a_non_text_observation():
    env = GenericTestEnv(reset_fn=lambda env, seed, options: (42, {}))
    assert checker.check_reset_types(env) == [
        "check_reset_types: the observation has type int; gem_core envs return text (or a dict with text and images)"
    ]


def test_check_step_types_fails_on_the_old_4_tuple():
    env = GenericTestEnv(step_fn=lambda env, action: ("obs", 0.0, False, {}))
    _fails(
        checker.check_step_types,
        env,
        match=r"returned tuple of length 4; expected \(observation, reward, terminated, truncated, info\)\. Likely bug: the old Gym 4-tuple",
    )


def test_check_env_reports_the_4_tuple_through_the_make_stack():
    spec = EnvSpec(
        "test:Old-v0",
        entry_point=lambda: GenericTestEnv(step_fn=lambda env, action: ("obs", 0.0, False, {})),
    )
    with pytest.raises(
        EnvCheckError,
        match=r"^check_step_types: .* raised TypeError: .*the old Gym 4-tuple API \(obs, reward, done, info\)",
    ):
        check_env(gem_core.make(spec))


@pytest.mark.parametrize(
    ("reward", "match"),
    [
        (True, r"returned reward True \(bool\) at step 1; expected a float"),
        (None, r"returned reward None \(NoneType\) at step 1; expected a float"),
        ("1.0", r"returned reward '1.0' \(str\) at step 1"),
        (float("nan"), r"returned reward nan at step 1; expected a finite float.*division by zero"),
        (float("-inf"), r"returned reward -inf at step 1"),
    ],
)
def test_check_step_types_fails_on_bad_rewards(reward, match):
    _fails(checker.check_step_types, _made(step_fn=_step_with(reward=reward)), match=match)


def test_check_step_types_fails_on_a_none_observation_and_a_bad_info():
    _fails(
        checker.check_step_types,
        _made(step_fn=_step_with(obs=None)),
        match="returned observation None at step 1",
    )
    _fails(
        checker.check_step_types,
        _made(step_fn=_step_with(info=None)),
        match="returned info of type NoneType; expected a dict",
    )


def test_check_step_types_accepts_numpy_rewards():
    assert checker.check_step_types(_made(step_fn=_step_with(reward=np.float32(0.5)))) == []


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("terminated", lambda env, v: int(v["terminated"]), r"terminated=0 \(int\)"),
        (
            "terminated",
            lambda env, v: np.bool_(v["terminated"]),
            r"terminated=(np\.)?False_? \(numpy\.bool_?\)",
        ),
        ("truncated", None, r"truncated=None \(NoneType\)"),
    ],
)
def test_check_done_flags_fails_on_non_bool_flags(field, value, shown):
    env = _made(step_fn=_step_with(**{field: value}))
    _fails(checker.check_done_flags, env, match=shown + r" at step 1; expected a Python bool")


def test_check_global_rng_untouched_catches_the_random_module_in_reset():
    env = _made(reset_fn=_reset_with(lambda env: f"start {random.randint(0, 9)}"))
    _fails(
        checker.check_global_rng_untouched,
        env,
        match=r"reset\(seed=0\) changed the global `random` state\. Likely bug: it calls random\.random/choice",
    )


def test_check_global_rng_untouched_catches_numpy_in_step():
    env = _made(step_fn=_step_with(obs=lambda env, v: f"obs {np.random.randint(10)}"))
    _fails(
        checker.check_global_rng_untouched,
        env,
        match=r"step\('a\d'\) changed the global numpy random state",
    )


def test_check_global_rng_untouched_catches_the_action_sampler():
    class GlobalSampler(GenericTestEnv):
        def sample_random_action(self) -> str:
            return random.choice("abc")

    _fails(
        checker.check_global_rng_untouched,
        OrderEnforcing(GlobalSampler()),
        match=r"sample_random_action\(\) changed the global `random` state",
    )


def test_check_reset_determinism_catches_an_unseeded_generator():
    own = random.Random()  # not the env's seeded rng
    env = _made(reset_fn=_reset_with(lambda env: f"start {own.randint(0, 10**9)}"))
    _fails(
        checker.check_reset_determinism,
        env,
        match=r"reset\(seed=0\) gave two different observations: .* Likely bug: the env draws from an unseeded source",
    )


def test_check_reset_determinism_catches_reseeding_from_entropy():
    def reset_fn(env, seed, options):
        if seed is None:
            env.rng = random.Random(secrets.randbits(64))
        return f"start {env.rng.randint(0, 10**9)}", {}

    _fails(
        checker.check_reset_determinism,
        _made(reset_fn=reset_fn),
        match=r"after reset\(seed=0\), the next reset\(\) without a seed gave .*re-seeds from OS entropy",
    )


def test_check_trajectory_determinism_catches_an_unseeded_step():
    env = _made(step_fn=_step_with(obs=lambda env, v: f"obs {secrets.randbelow(10**9)}"))
    _fails(
        checker.check_trajectory_determinism,
        env,
        match=r"the same seed \(0\) and actions gave a different observation at step 1",
    )


def test_check_trajectory_determinism_catches_state_leaking_across_episodes():
    counter = itertools.count()
    env = _made(step_fn=_step_with(reward=lambda env, v: float(next(counter))))
    _fails(
        checker.check_trajectory_determinism,
        env,
        match=r"different reward at step 1: .*not cleared in reset\(\)",
    )


def test_check_trajectory_determinism_catches_a_nondeterministic_sampler():
    class Sampler(GenericTestEnv):
        def sample_random_action(self) -> str:
            return f"a{secrets.randbelow(10**9)}"

    _fails(
        checker.check_trajectory_determinism,
        OrderEnforcing(Sampler()),
        match=r"sample_random_action\(\) gave 'a\d+' and then 'a\d+' as action 1 after the same reset\(seed=0\)",
    )


def test_check_trajectory_determinism_falls_back_to_a_fixed_script():
    class NoSampler(GenericTestEnv):
        def sample_random_action(self):
            raise NotImplementedError

    notes = checker.check_trajectory_determinism(OrderEnforcing(NoSampler(episode_len=50)))
    assert notes == [
        "check_trajectory_determinism: NoSampler does not implement sample_random_action(); the fixed FALLBACK_ACTIONS script was used"
    ]


def test_check_trajectory_determinism_fails_when_the_sampler_raises():
    class BadSampler(GenericTestEnv):
        def sample_random_action(self):
            raise KeyError("no actions")

    _fails(
        checker.check_trajectory_determinism,
        BadSampler(),
        match=r"sample_random_action\(\) raised KeyError: 'no actions'",
    )


def test_check_seed_variation_catches_an_ignored_seed():
    def reset_fn(env, seed, options):
        env.t = 0
        if seed is not None:
            env.own = random.Random(0)  # the bug: a fixed seed instead of `seed`
        return f"start {env.own.randint(0, 10**9)}", {}

    _fails(
        checker.check_seed_variation,
        _made(reset_fn=reset_fn),
        match=r"seeds 0\.\.24 all gave the same episode .*yet unseeded resets vary\. Likely bug: the seed is ignored",
    )


def test_check_seed_variation_sees_randomness_hidden_from_the_first_observation():
    # Like a guessing game: the first observation never changes, the secret does.
    def reset_fn(env, seed, options):
        env.t = 0
        env.secret = env.rng.randint(0, 10**6)
        return "Guess my number.", {}

    env = _made(
        reset_fn=reset_fn, step_fn=_step_with(obs=lambda env, v: f"higher than {env.secret}")
    )
    assert checker.check_seed_variation(env) == []


def test_check_seed_variation_skips_non_random_envs_with_a_note():
    env = _made(reset_fn=_reset_with(lambda env: "a fixed puzzle"))
    assert checker.check_seed_variation(env) == [
        "check_seed_variation: 5 seeds and 4 unseeded resets gave identical episodes; the env is "
        "treated as not random and the check was skipped"
    ]


def test_check_seed_variation_tolerates_a_small_episode_pool():
    # Two possible episodes: some runs of 5 seeds hit the same one, later seeds do not.
    def reset_fn(env, seed, options):
        env.t = 0
        return ("left" if seed in range(0, 5) else env.rng.choice(["left", "right"])), {}

    assert checker.check_seed_variation(_made(reset_fn=reset_fn)) == []


def test_check_success_flag_catches_a_missing_success():
    env = _made(step_fn=_step_with(info=lambda env, v: {}))
    _fails(
        checker.check_success_flag,
        env,
        match=r"terminated an episode at step 3 without info\['success'\]\. Likely bug: step\(\) does not set info\['success'\]",
    )


@pytest.mark.parametrize(
    ("value", "shown"), [(1, r"1 \(int\)"), ("yes", r"'yes' \(str\)"), (None, r"None \(NoneType\)")]
)
def test_check_success_flag_catches_a_non_bool_success(value, shown):
    env = _made(step_fn=_step_with(info=lambda env, v: {"success": value}))
    _fails(
        checker.check_success_flag,
        env,
        match=rf"set info\['success'\]={shown} at step 1; expected a Python bool",
    )


def test_check_success_flag_notes_when_no_episode_terminates():
    env = TimeLimit(
        _made(episode_len=10**6, step_fn=_step_with(info=lambda env, v: {})), max_turns=3
    )
    assert checker.check_success_flag(env) == [
        "check_success_flag: no episode terminated in 4 episodes of up to 32 steps (3 scripted, "
        "1 of invalid actions), so the final-step info['success'] was not seen"
    ]


def test_check_step_after_end_fails_when_a_self_enforcing_env_keeps_paying():
    env = GenericTestEnv()
    env.spec = EnvSpec("test:NoOrder-v0", entry_point=GenericTestEnv, order_enforce=False)
    _fails(
        checker.check_step_after_end,
        env,
        match=r"step\(\) after the episode ended returned \(reward 4\.0\) instead of raising gem_core\.errors\.ResetNeeded",
    )


def test_check_step_after_end_fails_on_the_wrong_error():
    class WrongError(OrderEnforcing):
        def step(self, action):
            if self.has_reset and not self._live:
                raise RuntimeError("episode over")
            return super().step(action)

    _fails(
        checker.check_step_after_end,
        WrongError(GenericTestEnv()),
        match=r"after the episode ended raised RuntimeError: episode over; expected gem_core\.errors\.ResetNeeded",
    )


def test_check_step_after_end_passes_with_order_enforcing_and_skips_bare_envs():
    assert checker.check_step_after_end(_made()) == []
    assert checker.check_step_after_end(GenericTestEnv()) == [
        "check_step_after_end: <GenericTestEnv instance> has no OrderEnforcing layer (not built "
        "by gem_core.make); step-after-end enforcement was not checked"
    ]


def test_check_step_after_end_accepts_a_self_enforcing_env():
    class SelfEnforcing(GenericTestEnv):
        def step(self, action):
            if self.t >= self.episode_len:
                raise ResetNeeded("episode over; call reset()")
            return super().step(action)

    env = SelfEnforcing()
    env.spec = EnvSpec("test:SelfEnforcing-v0", entry_point=SelfEnforcing, order_enforce=False)
    assert checker.check_step_after_end(env) == []


@pytest.mark.parametrize(
    ("step_fn", "label"),
    [
        (lambda env, a: counting_step(env, a.strip() or a[0]), "an empty string"),
        (lambda env, a: counting_step(env, a.lower()), "None"),
        (
            lambda env, a: counting_step(env, int(a) if isinstance(a, str) and a.isdigit() else a),
            "1 MB of digits",
        ),
        (
            lambda env, a: counting_step(env, a.encode("utf-8") if isinstance(a, str) else a),
            "lone surrogates",
        ),
        (lambda env, a: counting_step(env, len(a) if a is not None else a), "the int 123"),
        (lambda env, a: counting_step(env, {}[a] if isinstance(a, bytes) else a), "bytes"),
    ],
)
def test_check_bad_actions_names_the_action_that_raised(step_fn, label):
    err = _fails(
        checker.check_bad_actions,
        _made(step_fn=step_fn),
        match=rf"on {label} \(.*\) during a live episode",
    )
    assert "Likely bug: step() assumes a well-formed str action" in str(err)
    assert err.__cause__ is not None


def test_check_bad_actions_catches_an_env_that_breaks_after_many_invalid_actions():
    def step_fn(env, action):
        env.invalid = getattr(env, "invalid", 0) + 1
        if env.invalid > len(checker.BAD_ACTIONS) + 9:
            raise RuntimeError("too many invalid actions")
        env.t += 1
        return "try again", -0.1, False, False, {"format_error": True}

    _fails(
        checker.check_bad_actions,
        _made(step_fn=step_fn),
        match=r"raised RuntimeError: too many invalid actions on invalid action 10 of 50 in a row",
    )


def test_check_bad_actions_resets_after_an_episode_ends():
    # Every bad action ends the episode; under OrderEnforcing a missing reset would raise.
    actions = []
    env = _made(episode_len=1, step_fn=lambda env, a: actions.append(a) or counting_step(env, a))
    assert checker.check_bad_actions(env) == []
    assert len(actions) == len(checker.BAD_ACTIONS) + 50


def test_check_close_twice_catches_a_second_close_that_raises():
    def close_fn(env):
        if env.closed > 1:
            raise OSError("socket already closed")

    err = _fails(
        checker.check_close_twice,
        _made(close_fn=close_fn),  # OrderEnforcing guards the outer close; the inner one is tried
        match=r"<GenericTestEnv instance>\.close\(\) raised OSError: socket already closed when called again",
    )
    assert isinstance(err.__cause__, OSError)
    _fails(
        checker.check_close_twice,
        GenericTestEnv(close_fn=close_fn),
        match=r"close\(\) \(second call\) raised OSError",
    )


def test_check_close_twice_catches_a_first_close_that_raises():
    def close_fn(env):
        raise RuntimeError("cannot close")

    _fails(
        checker.check_close_twice,
        GenericTestEnv(close_fn=close_fn),
        match=r"close\(\) \(first call\) raised RuntimeError: cannot close",
    )


def test_check_step_after_end_plays_up_to_the_turn_limit():
    env = TimeLimit(_made(episode_len=10**6), max_turns=100)  # longer than max_steps=32
    assert checker.check_step_after_end(env) == []
    assert env.elapsed_turns == 100


def test_check_success_flag_catches_a_missing_success_on_a_format_error_end():
    # Scripted actions never end the episode; an invalid action terminates it without success.
    def step_fn(env, action):
        if action in ("", "???"):
            return "format error", -1.0, True, False, {"format_error": True}
        return counting_step(env, action)[:4] + ({"success": False},)

    env = _made(episode_len=10**6, step_fn=step_fn)
    _fails(checker.check_success_flag, env, match=r"terminated an episode at step 1 without info\['success'\]")
