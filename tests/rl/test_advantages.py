"""Advantage estimators against plain-loop references, plus property tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gem_core.errors import InvalidArgument
from gem_core.rl import Episode, Turn, compute_advantages
from gem_core.rl.advantages import (
    discounted_returns,
    dr_grpo,
    gae,
    grpo,
    rebn,
    reinforce,
    rloo,
)

# --- plain-loop references ----------------------------------------------------------


def ref_returns(rewards, gamma):
    out = []
    for t in range(len(rewards)):
        g = 0.0
        for k in range(t, len(rewards)):
            g += gamma ** (k - t) * rewards[k]
        out.append(g)
    return out


def ref_rebn(values, eps):
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / n  # population variance
    return [(v - mean) / (math.sqrt(var) + eps) for v in values]


def ref_groups(returns, groups):
    members = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    return members


def ref_grpo(returns, groups, scale, eps):
    out = [0.0] * len(returns)
    for idx in ref_groups(returns, groups).values():
        vals = [returns[i] for i in idx]
        mean = sum(vals) / len(vals)
        std = (
            math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
            if len(vals) > 1
            else 0.0
        )
        for i in idx:
            out[i] = (returns[i] - mean) / (std + eps) if scale else returns[i] - mean
    return out


def ref_rloo(returns, groups):
    out = [0.0] * len(returns)
    for idx in ref_groups(returns, groups).values():
        for i in idx:
            others = [returns[j] for j in idx if j != i]
            out[i] = returns[i] - sum(others) / len(others) if others else 0.0
    return out


def ref_gae(rewards, values, gamma, lam, last_value, terminated):
    T = len(rewards)
    adv = [0.0] * T
    for t in range(T):
        total = 0.0
        for k in range(t, T):
            v_next = values[k + 1] if k + 1 < T else (0.0 if terminated else last_value)
            delta = rewards[k] + gamma * v_next - values[k]
            total += (gamma * lam) ** (k - t) * delta
        adv[t] = total
    return adv


# Few examples and no deadline: the suite shares 2 loaded cores.
PROPS = settings(max_examples=40, deadline=None)

# --- strategies ------------------------------------------------------------------------

reward = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
episodes_st = st.lists(st.lists(reward, min_size=1, max_size=6), min_size=1, max_size=8)
gammas = st.floats(0, 1)


@PROPS
@given(episodes_st, gammas)
def test_discounted_returns_match_reference(eps_rewards, gamma):
    got = discounted_returns(eps_rewards, gamma)
    for rewards, g in zip(eps_rewards, got, strict=True):
        np.testing.assert_allclose(g, ref_returns(rewards, gamma), rtol=1e-9, atol=1e-9)


@PROPS
@given(episodes_st)
def test_gamma_zero_gives_per_turn_rewards(eps_rewards):
    for rewards, g in zip(eps_rewards, discounted_returns(eps_rewards, 0.0), strict=True):
        np.testing.assert_array_equal(g, rewards)


@pytest.mark.parametrize("gamma", [-0.1, 1.01, float("nan")])
def test_gamma_is_validated(gamma):
    with pytest.raises(InvalidArgument, match=r"gamma must be in \[0, 1\]"):
        discounted_returns([[1.0]], gamma)


@PROPS
@given(st.lists(reward, min_size=1, max_size=40))
def test_rebn_matches_reference(values):
    np.testing.assert_allclose(rebn(values), ref_rebn(values, 1e-8), rtol=1e-7, atol=1e-7)


@PROPS
@given(st.lists(reward, min_size=2, max_size=40))
def test_rebn_mean_zero_std_one_on_non_constant_input(values):
    assume(np.std(values) > 1e-2)
    out = rebn(values)
    assert abs(out.mean()) < 1e-9
    assert abs(out.std() - 1.0) < 1e-5  # exactly std / (std + eps), eps = 1e-8


@PROPS
@given(st.floats(-1e3, 1e3, allow_nan=False), st.integers(1, 50))
def test_rebn_finite_on_constant_input(value, n):
    out = rebn([value] * n)
    assert np.all(np.isfinite(out))
    assert np.all(np.abs(out) < 1e-3)


@PROPS
@given(st.lists(reward, min_size=2, max_size=40), st.floats(-100, 100), st.floats(0.01, 100))
def test_rebn_invariant_to_affine_maps_of_returns(values, shift, scale):
    """rebn(a*G + b) == rebn(G) for a > 0, up to the eps term (tested where both stds
    are >= 1e-2, so eps/std <= 1e-6)."""
    shifted = [scale * v + shift for v in values]
    assume(np.std(values) > 1e-2 and np.std(shifted) > 1e-2)
    np.testing.assert_allclose(rebn(shifted), rebn(values), atol=1e-5)


@PROPS
@given(episodes_st, gammas, st.floats(0.01, 100))
def test_rebn_of_returns_invariant_to_scaling_rewards(eps_rewards, gamma, scale):
    """Scaling every reward by a > 0 scales every return by a, for any gamma and lengths."""
    flat = np.concatenate(discounted_returns(eps_rewards, gamma))
    scaled = np.concatenate(
        discounted_returns([[scale * r for r in ep] for ep in eps_rewards], gamma)
    )
    assume(np.std(flat) > 1e-2 and np.std(scaled) > 1e-2)
    np.testing.assert_allclose(rebn(scaled), rebn(flat), atol=1e-5)


@PROPS
@given(st.lists(reward, min_size=2, max_size=30), st.floats(-100, 100), gammas)
def test_rebn_invariant_to_shifting_rewards_when_single_turn(rewards, shift, gamma):
    """Shifting rewards by c shifts G_t by c * sum_k gamma^k over the *remaining* turns,
    which is uniform only when every transition has the same horizon: we test single-turn
    episodes (any gamma). For multi-turn episodes shift invariance does not hold in general."""
    base = np.concatenate(discounted_returns([[r] for r in rewards], gamma))
    moved = np.concatenate(discounted_returns([[r + shift] for r in rewards], gamma))
    assume(np.std(base) > 1e-2)
    np.testing.assert_allclose(rebn(moved), rebn(base), atol=1e-5)


@PROPS
@given(st.lists(reward, min_size=1, max_size=30))
def test_single_turn_gamma_one_reduces_to_batch_normalised_rewards(rewards):
    returns = np.concatenate(discounted_returns([[r] for r in rewards], 1.0))
    np.testing.assert_array_equal(returns, rewards)
    np.testing.assert_allclose(rebn(returns), ref_rebn(rewards, 1e-8), rtol=1e-7, atol=1e-7)


groups_st = st.lists(st.tuples(reward, st.integers(0, 4)), min_size=1, max_size=30)


@PROPS
@given(groups_st, st.booleans())
def test_grpo_matches_reference(pairs, scale):
    returns, groups = [p[0] for p in pairs], [p[1] for p in pairs]
    np.testing.assert_allclose(
        grpo(returns, groups, scale_by_std=scale),
        ref_grpo(returns, groups, scale, 1e-6),
        rtol=1e-7,
        atol=1e-7,
    )


@PROPS
@given(groups_st)
def test_dr_grpo_is_group_centering(pairs):
    returns, groups = [p[0] for p in pairs], [p[1] for p in pairs]
    np.testing.assert_allclose(
        dr_grpo(returns, groups), ref_grpo(returns, groups, False, 0.0), atol=1e-9
    )


@PROPS
@given(groups_st)
def test_rloo_matches_reference(pairs):
    returns, groups = [p[0] for p in pairs], [p[1] for p in pairs]
    np.testing.assert_allclose(
        rloo(returns, groups), ref_rloo(returns, groups), rtol=1e-9, atol=1e-9
    )


def test_group_ids_may_be_any_hashable_and_must_match_length():
    out = grpo([1.0, 0.0, 5.0], ["a/1", "a/1", ("b", 2)])
    assert out[2] == 0.0 and out[0] > 0 > out[1]
    with pytest.raises(InvalidArgument, match="group_ids has 2 entries but there are 3"):
        grpo([1.0, 0.0, 5.0], [0, 0])


@PROPS
@given(st.lists(reward, max_size=20))
def test_reinforce(values):
    np.testing.assert_array_equal(reinforce(values), values)
    if values:
        np.testing.assert_allclose(
            reinforce(values, baseline="mean"), np.array(values) - np.mean(values), atol=1e-9
        )
    with pytest.raises(InvalidArgument, match="baseline must be"):
        reinforce(values, baseline="median")


@PROPS
@given(
    st.lists(st.tuples(reward, reward), min_size=1, max_size=8),
    gammas,
    st.floats(0, 1),
    reward,
    st.booleans(),
)
def test_gae_matches_reference(rv, gamma, lam, last_value, terminated):
    rewards, values = [p[0] for p in rv], [p[1] for p in rv]
    adv, ret = gae(rewards, values, gamma, lam, last_value=last_value, terminated=terminated)
    expected = ref_gae(rewards, values, gamma, lam, last_value, terminated)
    np.testing.assert_allclose(adv, expected, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(ret, np.array(expected) + values, rtol=1e-7, atol=1e-7)


def test_gae_lambda_one_is_return_minus_value():
    rewards, values = [0.0, 0.0, 1.0], [0.2, 0.5, 0.9]
    adv, _ = gae(rewards, values, 0.9, 1.0)
    np.testing.assert_allclose(adv, np.array(ref_returns(rewards, 0.9)) - values)
    with pytest.raises(InvalidArgument, match="same length"):
        gae([1.0], [0.1, 0.2], 1.0, 1.0)


def _episode(rewards, seed=0, env_id="e"):
    turns = [
        Turn(prompt_ids=[1], response_ids=[2], response_logprobs=[0.0], reward=r) for r in rewards
    ]
    return Episode(env_id=env_id, seed=seed, turns=turns)


def test_compute_advantages_aligns_with_turns():
    eps = [
        _episode([0.0, 0.0, 1.0], seed=1),
        _episode([0.5], seed=1),
        _episode([], seed=2),
        _episode([1.0, -1.0], seed=2),
    ]
    rewards = [e.rewards() for e in eps]
    flat = [g for r in rewards for g in ref_returns(r, 0.9)]
    adv = compute_advantages(eps, "rebn", gamma=0.9)
    assert [a.shape for a in adv] == [(3,), (1,), (0,), (2,)]
    np.testing.assert_allclose(np.concatenate(adv), ref_rebn(flat, 1e-8))

    adv = compute_advantages(eps, "reinforce", gamma=0.5, baseline="mean")
    flat = [g for r in rewards for g in ref_returns(r, 0.5)]
    np.testing.assert_allclose(np.concatenate(adv), np.array(flat) - np.mean(flat))

    # group estimators: the episode return G_0 is normalised within (env_id, seed)
    ep_returns = [sum(r) for r in rewards]
    groups = [1, 1, 2, 2]
    for name, ref in [
        ("grpo", ref_grpo(ep_returns, groups, True, 1e-6)),
        ("dr_grpo", ref_grpo(ep_returns, groups, False, 0.0)),
        ("rloo", ref_rloo(ep_returns, groups)),
    ]:
        adv = compute_advantages(eps, name)
        for a, expected, e in zip(adv, ref, eps, strict=True):
            np.testing.assert_allclose(a, [expected] * e.num_turns, atol=1e-9)

    with pytest.raises(InvalidArgument, match="unknown estimator 'gae'"):
        compute_advantages(eps, "gae")
