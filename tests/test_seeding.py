"""Tests for gem_core.seeding: per-env generators, seed validation, no global state."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

from gem_core import seeding
from gem_core.errors import InvalidArgument


@pytest.mark.parametrize("seed", [0, 1, 2**63 - 1, 2**100, np.int64(7), np.uint32(3)])
def test_check_seed_accepts_non_negative_ints(seed):
    value = seeding.check_seed(seed)
    assert value == int(seed) and type(value) is int


@pytest.mark.parametrize("seed", [-1, True, 1.0, "1", None, [1]])
def test_check_seed_rejects_everything_else_with_the_value(seed):
    with pytest.raises(InvalidArgument, match=r"seed must be a non-negative int or None, got "):
        seeding.check_seed(seed)


def test_np_random_is_reproducible_and_reports_its_seed():
    (a, seed_a), (b, seed_b) = seeding.np_random(5), seeding.np_random(5)
    assert seed_a == seed_b == 5
    assert a.integers(0, 10**9, size=5).tolist() == b.integers(0, 10**9, size=5).tolist()


def test_np_random_without_seed_draws_one_and_returns_it():
    gen, seed = seeding.np_random(None)
    again, _ = seeding.np_random(seed)
    assert isinstance(seed, int) and seed >= 0
    assert gen.random() == again.random()


def test_py_random_is_reproducible_and_salted():
    assert seeding.py_random(9).random() == seeding.py_random(9).random()
    assert seeding.py_random(9).random() != random.Random(9).random()
    assert seeding.py_random(9).random() != seeding.py_random(10).random()


def test_py_random_rejects_bad_seeds():
    with pytest.raises(InvalidArgument, match="got -3"):
        seeding.py_random(-3)


def test_generators_leave_the_global_state_alone():
    random.seed(123)
    np.random.seed(123)
    py_before, np_before = random.getstate(), np.random.get_state()[1].copy()
    seeding.np_random(1)[0].random()
    seeding.np_random(None)[0].random()
    seeding.py_random(1).random()
    seeding.py_random(None).random()
    assert random.getstate() == py_before
    assert np.array_equal(np.random.get_state()[1], np_before)


def test_py_random_stream_is_the_same_in_another_process():
    code = "from gem_core import seeding; print(repr(seeding.py_random(42).random()))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
        cwd=".",
    ).stdout.strip()
    assert out == repr(seeding.py_random(42).random())


def test_check_seed_does_not_import_numpy():
    code = (
        "import sys\n"
        "from gem_core import seeding\n"
        "for bad in ('x', 1.5, -1):\n"
        "    try: seeding.check_seed(bad)\n"
        "    except Exception: pass\n"
        "seeding.py_random(3)\n"
        "print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
