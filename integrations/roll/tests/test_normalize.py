"""gem_roll.normalize: the population-std normaliser against a plain loop (no ROLL needed)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from gem_roll.normalize import DEFAULT_EPS, native_ratio, normalize_returns

from gem_core.errors import InvalidArgument


def plain(values, groups=None, eps=DEFAULT_EPS):
    keys = [0] * len(values) if groups is None else list(groups)
    out = [0.0] * len(values)
    for key in set(keys):
        idx = [i for i, k in enumerate(keys) if k == key]
        mean = sum(values[i] for i in idx) / len(idx)
        std = math.sqrt(sum((values[i] - mean) ** 2 for i in idx) / len(idx))
        for i in idx:
            out[i] = (values[i] - mean) / (std + eps)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_batch_normalisation_equals_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=int(rng.integers(1, 40))).tolist()
    got = normalize_returns(values)
    assert np.allclose(got, plain(values), atol=1e-12), "batch ReBN differs from the plain loop"


@pytest.mark.parametrize("seed", range(8))
def test_group_normalisation_equals_a_plain_loop(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 40))
    values = rng.normal(size=n).tolist()
    groups = [f"g{int(g)}" for g in rng.integers(0, 4, size=n)]
    got = normalize_returns(values, groups)
    assert np.allclose(got, plain(values, groups), atol=1e-12), "per-group normalisation differs"


def test_population_std_not_sample_std():
    values = [0.0, 1.0]  # population std 0.5, sample std 0.707
    assert normalize_returns(values).tolist() == pytest.approx([-1.0, 1.0], abs=1e-6)


def test_constant_and_single_values_give_zeros():
    assert normalize_returns([3.0, 3.0, 3.0]).tolist() == [0.0, 0.0, 0.0]
    assert normalize_returns([5.0]).tolist() == [0.0]
    assert normalize_returns([]).size == 0


def test_native_ratio_is_the_documented_one():
    assert native_ratio(14) == pytest.approx(math.sqrt(13 / 14), abs=1e-15)
    assert native_ratio(14) == pytest.approx(0.963622, abs=5e-6), "the ratio TRAINERS.md measured for 14 turns"
    rng = np.random.default_rng(0)
    g = rng.normal(size=14)
    sample = (g - g.mean()) / g.std(ddof=1)
    assert np.allclose(sample, normalize_returns(g, eps=1e-300) * native_ratio(14), atol=1e-12)


@pytest.mark.parametrize(
    ("values", "groups", "match"),
    [
        ([1.0, float("nan")], None, "finite"),
        ([1.0, float("inf")], None, "finite"),
        ([[1.0, 2.0]], None, "one-dimensional"),
        ([1.0, 2.0], ["a"], "one id per return"),
    ],
)
def test_bad_input_is_named(values, groups, match):
    with pytest.raises(InvalidArgument, match=match):
        normalize_returns(values, groups)


@pytest.mark.parametrize("n", [0, 1, True, 2.0])
def test_native_ratio_bad_n(n):
    with pytest.raises(InvalidArgument, match="n must be an int >= 2"):
        native_ratio(n)


def test_large_batch_is_fast():
    g = np.random.default_rng(1).normal(size=200_000)
    groups = np.arange(g.size) % 1000
    t0 = time.perf_counter()
    normalize_returns(g, groups.tolist())
    assert time.perf_counter() - t0 < 5.0, "200k transitions in 1000 groups took over 5 s"
