"""Checks every registered game id must pass: well-formed random actions, fuzzing, turn budget."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem_core
from gem_core.envs.games.base import LanguageGame, extract_last_boxed
from gem_core.envs.games.oracles import oracle_for

GAME_IDS = sorted(i for i in gem_core.registry if i.startswith("game:"))


def _budget(env) -> int:
    return env.unwrapped.max_turns


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_random_actions_are_well_formed(env_id):
    env = gem_core.make(env_id)
    for seed in range(20):
        env.reset(seed=seed)
        for _ in range(_budget(env)):
            action = env.sample_random_action()
            assert extract_last_boxed(action) is not None, f"{env_id}: {action!r} has no box"
            _, _, terminated, truncated, info = env.step(action)
            assert not info["format_error"], f"{env_id}: sample_random_action gave {action!r}"
            if terminated or truncated:
                break
        else:
            pytest.fail(f"{env_id}: episode did not end within max_turns={_budget(env)}")
    env.close()


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_oracle_actions_parse(env_id):
    env = gem_core.make(env_id)
    oracle = oracle_for(env)
    env.reset(seed=0)
    _, _, _, _, info = env.step(oracle(env))
    assert not info["format_error"] and not info["invalid_action"], f"{env_id}: oracle move invalid"


@pytest.mark.parametrize("env_id", [i for i in GAME_IDS if i.endswith("-random")])
def test_random_variant_never_crashes(env_id):
    env = gem_core.make(env_id)
    for seed in range(60):
        obs, _ = env.reset(seed=seed)
        assert isinstance(obs, str) and obs
        env.step(env.sample_random_action())
    env.close()


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_retry_mode_lets_agent_continue(env_id):
    env = gem_core.make(env_id, format_error="retry")
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step("no box here")
    assert info["format_error"] and reward == pytest.approx(-0.1)
    if _budget(env) > 1:
        assert not terminated and not truncated
        env.step(env.sample_random_action())  # the episode goes on
    env = gem_core.make(env_id)
    env.reset(seed=1)
    _, _, terminated, _, info = env.step("no box here")
    assert terminated and info["format_error"] and info["success"] is False


_JUNK = st.one_of(
    st.text(max_size=60),
    st.builds(lambda s: f"\\boxed{{{s}}}", st.text(max_size=40)),
    st.builds(lambda n: f"\\boxed{{{n}}}", st.integers(min_value=-(10**30), max_value=10**30)),
    st.builds(lambda a, b: f"\\boxed{{{a} {b}}}", st.integers(-5, 20), st.integers(-5, 20)),
    st.builds(lambda a, b: f"\\boxed{{{a}, {b}}}", st.integers(-5, 20), st.integers(-5, 20)),
    st.sampled_from(["\\boxed{}", "\\boxed{", "\\boxed{{}}", "\\boxed{\u202e\u200b}", "\\boxed{🙂}", "x" * 5000]),
    st.sampled_from([None, 123, 4.5, [], {}, b"\\boxed{1}"]),
)


@pytest.mark.parametrize("env_id", GAME_IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.one_of(_JUNK, st.just("RANDOM")), min_size=40, max_size=40), seed=st.integers(0, 10**6))
def test_fuzz_never_raises_and_ends_within_budget(env_id, actions, seed):
    # 25 examples x 40 actions = 1,000 actions per game id.
    env = gem_core.make(env_id, format_error="retry")
    env.reset(seed=seed)
    turns = 0
    for a in actions:
        action = env.sample_random_action() if a == "RANDOM" else a
        obs, reward, terminated, truncated, info = env.step(action)
        turns += 1
        assert isinstance(obs, str) and isinstance(reward, float)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert isinstance(info["success"], bool)
        assert turns <= _budget(env)
        if terminated or truncated:
            env.reset(seed=seed + turns)
            turns = 0
    assert isinstance(env.unwrapped, LanguageGame)
