"""gem_core.grading._shared: the process-wide grader holder and its environment settings."""

from __future__ import annotations

import os

import pytest

from gem_core.errors import InvalidArgument
from gem_core.grading._shared import ProcessShared, env_number


class _Thing:
    def __init__(self) -> None:
        self.closed = False
        self._pid = os.getpid()

    def close(self) -> None:
        self.closed = True


def test_get_makes_once_and_replaces_a_closed_or_inherited_instance():
    made: list[_Thing] = []
    shared = ProcessShared(lambda: made.append(_Thing()) or made[-1])
    assert shared.value is None
    first = shared.get()
    assert shared.get() is first and made == [first]
    first.close()
    second = shared.get()
    assert second is not first and shared.value is second
    second._pid = -1  # as if inherited across a fork
    assert shared.get() is not second and len(made) == 3


def test_a_forked_child_starts_without_the_parents_instance():
    shared = ProcessShared(_Thing)
    parent = shared.get()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never run pytest's teardown
        try:
            os.write(w, b"1" if shared.value is None and shared.get() is not parent else b"0")
        finally:
            os._exit(0)
    os.close(w)
    verdict = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert verdict == b"1"
    assert shared.value is parent and not parent.closed


def test_env_number(monkeypatch):
    monkeypatch.delenv("GEM_TEST_N", raising=False)
    assert env_number("GEM_TEST_N", 3, int) == 3
    monkeypatch.setenv("GEM_TEST_N", " 5 ")
    assert env_number("GEM_TEST_N", 3, int) == 5
    monkeypatch.setenv("GEM_TEST_N", "five")
    with pytest.raises(InvalidArgument, match=r"^\$GEM_TEST_N must be a int, got 'five'; unset it for the default 3$"):
        env_number("GEM_TEST_N", 3, int)


def test_sized_by_environment_reads_the_three_variables_when_called(monkeypatch):
    from gem_core.grading._shared import sized_by_environment

    make = sized_by_environment(
        lambda w, t, memory_mb: (w, t, memory_mb), "GEM_TEST_G", workers=2, timeout=1.5, memory_mb=64
    )
    for name in ("GEM_TEST_G_WORKERS", "GEM_TEST_G_TIMEOUT", "GEM_TEST_G_MEMORY_MB"):
        monkeypatch.delenv(name, raising=False)
    assert make() == (2, 1.5, 64)
    monkeypatch.setenv("GEM_TEST_G_WORKERS", "3")
    monkeypatch.setenv("GEM_TEST_G_TIMEOUT", "0.5")
    monkeypatch.setenv("GEM_TEST_G_MEMORY_MB", "128")
    assert make() == (3, 0.5, 128)
