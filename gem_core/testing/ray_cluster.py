"""A multi-node Ray cluster on the loopback address, kept entirely in one temp dir: for tests and benchmarks.

``ray.cluster_utils.Cluster`` writes the head's address to Ray's *default* temp dir
(``$RAY_TMPDIR/ray``, else ``$TMPDIR/ray``, else ``/tmp/ray``) whatever ``temp_dir`` its
nodes were given, and does not create that directory: on a machine that has never run
Ray the cluster fails with ``FileNotFoundError: '/tmp/ray/ray_current_cluster'``, and on
one that has, a leftover address file from another run sits where ``ray.init("auto")``
reads it. `loopback_cluster` points ``RAY_TMPDIR`` at its own temp dir for the cluster's
life (the worker processes inherit it), creates the directory Ray expects there, and
restores the environment afterwards, so nothing depends on, or is left in, the host's
``/tmp``.

Every node advertises 127.0.0.1 only when ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` was set
before Ray was first imported; `loopback_cluster` checks that and the nodes' addresses.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from gem_core.distributed import RAY_LOOPBACK_ENV

__all__ = ["loopback_cluster", "RAY_LOOPBACK_ENV"]


@contextlib.contextmanager
def loopback_cluster(temp_dir: str | os.PathLike[str], *, num_nodes: int = 2,
                     node_args: Mapping[str, Any] | None = None,
                     system_config: Mapping[str, Any] | None = None,
                     connect: bool = True, shutdown_timeout: float = 30.0) -> Iterator[Any]:
    """A ``ray.cluster_utils.Cluster`` of ``num_nodes`` nodes on 127.0.0.1, this process connected.

    Args:
        temp_dir: an empty directory for the nodes' sessions, sockets and logs; it also
            becomes ``RAY_TMPDIR`` while the cluster runs.
        num_nodes: the head plus ``num_nodes - 1`` worker nodes.
        node_args: ``Cluster.add_node`` arguments for every node (``num_cpus``,
            ``resources``, ``object_store_memory``, ...).
        system_config: the head's ``_system_config`` (e.g. fast health checks).
        connect: call ``ray.init(address=cluster.address)`` (and disconnect at the end).
        shutdown_timeout: seconds the driver's ``ray.shutdown()`` may take at the end
            (it can block joining a listener thread after a long session; the cluster's
            processes are stopped either way).

    Yields:
        The cluster; ``cluster.temp_dir`` is ``temp_dir``.

    Raises:
        RuntimeError: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` was not set before Ray was
            imported, or a node advertises an address other than 127.0.0.1.
    """
    from gem_core.distributed import import_ray

    ray = import_ray()
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    if ray_constants.ENABLE_RAY_CLUSTER:
        raise RuntimeError(
            f"Ray was imported without {RAY_LOOPBACK_ENV}=0, so its nodes would advertise this "
            f"machine's interface address instead of 127.0.0.1; set os.environ[{RAY_LOOPBACK_ENV!r}] "
            "= '0' before anything imports ray (e.g. at the top of conftest.py)"
        )
    if num_nodes < 1:
        raise ValueError(f"num_nodes must be at least 1, got {num_nodes}")
    temp_dir = os.fspath(temp_dir)
    node = dict(node_args or {})
    old_tmpdir = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp_dir
    # Where Cluster writes ray_current_cluster (Ray's default temp dir, now under temp_dir).
    os.makedirs(os.path.join(temp_dir, "ray"), exist_ok=True)
    cluster = None
    try:
        head = {**node, "include_dashboard": False, "temp_dir": temp_dir}
        if system_config:
            head["_system_config"] = dict(system_config)
        cluster = Cluster(initialize_head=True, head_node_args=head)
        cluster.temp_dir = temp_dir
        for _ in range(num_nodes - 1):
            cluster.add_node(**node)
        cluster.wait_for_nodes()
        if not cluster.address.startswith("127.0.0.1:"):
            raise RuntimeError(f"the head node advertises {cluster.address}, not 127.0.0.1")
        if connect:
            ray.init(address=cluster.address)
            alive = [n for n in ray.nodes() if n["Alive"]]
            addresses = {n["NodeManagerAddress"] for n in alive}
            if len(alive) != num_nodes or addresses != {"127.0.0.1"}:
                raise RuntimeError(f"expected {num_nodes} nodes on 127.0.0.1, Ray reports {alive}")
        yield cluster
    finally:
        if connect and ray.is_initialized():
            stopper = threading.Thread(target=ray.shutdown, daemon=True)
            stopper.start()
            stopper.join(shutdown_timeout)
        if cluster is not None:
            cluster.shutdown()
        if old_tmpdir is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old_tmpdir
