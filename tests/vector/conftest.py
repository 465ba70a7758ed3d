"""Fixtures for the vector tests: build a sync or async vector env that is closed afterwards."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gem_core.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv
from tests.testing_env import GenericTestEnv, counting_step

KINDS = ["sync", "async", "local"]  # local: AsyncVectorEnv(local_shard=True)


def generic(episode_len: int = 3, step_fn: Callable[..., tuple] = counting_step, **kwargs: Any):
    """A picklable factory of `GenericTestEnv`."""
    return functools.partial(GenericTestEnv, episode_len=episode_len, step_fn=step_fn, **kwargs)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def build(kind: str) -> Iterator[Callable[..., VectorEnv]]:
    """``build(env_fns, **kwargs)``: a vector env of the parametrized kind, closed at teardown."""
    made: list[VectorEnv] = []

    def _build(env_fns: list[Callable[[], Any]], **kwargs: Any) -> VectorEnv:
        cls = SyncVectorEnv if kind == "sync" else AsyncVectorEnv
        if kind != "sync":
            kwargs.setdefault("timeout", 20.0)
        if kind == "local":
            kwargs["local_shard"] = True
            if "num_workers" in kwargs:  # the same number of shards: one is this process's
                kwargs["num_workers"] -= 1
        vec = cls(env_fns, **kwargs)
        made.append(vec)
        return vec

    yield _build
    for vec in made:
        vec.close()
