"""A two-node Ray cluster on the loopback address, shared by the tests of gem_core.distributed."""

from __future__ import annotations

import os

# Before Ray is imported anywhere: with Ray 2.60 on Linux this makes every node of a
# local cluster advertise 127.0.0.1 (node_ip_address alone did not); the tests may
# send traffic to the loopback address only. The cluster fixture asserts it.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import functools  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

REPO = str(Path(__file__).resolve().parents[2])
MB = 1024 * 1024
NODE = {"num_cpus": 4, "resources": {"gem_env": 8}, "object_store_memory": 80 * MB}
# Fast failure detection, so that a removed node is declared dead in a second or two.
SYSTEM_CONFIG = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 300,
    "health_check_timeout_ms": 300,
    "health_check_failure_threshold": 3,
}
# Small actors: many fit on the two 4-CPU nodes.
ACTOR = {"num_cpus": 0.25}


def _raylets(marker: str) -> list[int]:
    """Pids of the Ray processes whose command line mentions ``marker`` (the temp dir)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and ("raylet" in cmd or "gcs_server" in cmd):
            pids.append(int(entry))
    return pids


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A head and one worker node on 127.0.0.1 (`gem_core.testing.ray_cluster`), this process connected.

    Everything Ray writes, the address file ``ray.cluster_utils.Cluster`` puts in Ray's
    default temp dir included, stays in this fixture's temp dir: the tests pass on a machine
    that has never run Ray (no ``/tmp/ray``) and ignore what earlier runs left there.
    """
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'gem-core[ray]'")
    from gem_core.testing.ray_cluster import loopback_cluster

    assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    temp_dir = str(tmp_path_factory.mktemp("ray"))
    old_path = os.environ.get("PYTHONPATH")
    # Workers import the tests' env factories (tests.testing_env) like the driver does.
    os.environ["PYTHONPATH"] = REPO + (os.pathsep + old_path if old_path else "")
    try:
        with loopback_cluster(temp_dir, num_nodes=2, node_args=NODE,
                              system_config=SYSTEM_CONFIG) as cluster:
            yield cluster
    finally:
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path
    assert not _raylets(temp_dir), "Ray processes outlived the cluster"


@pytest.fixture
def ray_vecs(ray_cluster: Any) -> Iterator[Callable[..., Any]]:
    """``make(env_fns, **kwargs)``: a `RayVectorEnv` of small actors, closed at teardown."""
    from gem_core.distributed import RayVectorEnv

    made: list[Any] = []

    def _make(env_fns: list[Callable[[], Any]], **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", 30.0)
        kwargs.setdefault("ray_options", ACTOR)
        kwargs.setdefault("num_workers", min(2, len(env_fns)) if isinstance(env_fns, list) else None)
        vec = RayVectorEnv(env_fns, **kwargs)
        made.append(vec)
        return vec

    yield _make
    for vec in made:
        vec.close()


def partial(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
    return functools.partial(fn, *args, **kwargs)
