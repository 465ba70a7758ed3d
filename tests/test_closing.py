"""gem_core._closing.Closing: ``with`` gives the object and closes it, on an exception too."""

from __future__ import annotations

import pytest

from gem_core._closing import Closing


class _Resource(Closing):
    def __init__(self) -> None:
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


def test_with_gives_the_object_and_closes_it():
    r = _Resource()
    with r as entered:
        assert entered is r and r.closes == 0
    assert r.closes == 1


def test_an_exception_closes_and_propagates():
    r = _Resource()
    with pytest.raises(KeyError, match="boom"), r:
        raise KeyError("boom")
    assert r.closes == 1


@pytest.mark.parametrize(
    "path",
    [
        "gem_core.sandbox.pool:Sandbox",
        "gem_core.sandbox.shell:Shell",
        "gem_core.search.index:SearchIndex",
        "gem_core.vector.vector_env:VectorEnv",
        "gem_core.compat.vector.vector_env:VectorEnv",
        "gem_core.distributed.pool:RayEnvPool",
        "gem_core.tools.base:Tool",
        "gem_core.grading.math:MathGrader",
    ],
)
def test_the_resource_classes_are_context_managers_through_closing(path):
    import importlib

    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, Closing) and cls.__enter__ is Closing.__enter__
