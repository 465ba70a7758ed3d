"""Ray, imported lazily: the `gem-core[ray]` check, connecting to a cluster within a timeout."""

from __future__ import annotations

import math
import os
import socket
import sys
import threading
import warnings
from typing import Any

from gem_core.errors import InvalidArgument, RayConnectionError, import_optional

__all__ = ["RayConnectionError", "import_ray", "connect", "DEFAULT_CONNECT_TIMEOUT", "RAY_LOOPBACK_ENV"]

DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds `connect` waits for a cluster address to answer."""
RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Set to ``"0"`` before Ray is imported, a local cluster binds and advertises 127.0.0.1 only."""


def import_ray() -> Any:
    """The ``ray`` module, or `DependencyNotInstalled` naming ``gem-core[ray]``."""
    return import_optional("ray", extra="ray", purpose="running envs on Ray actors (gem_core.distributed)")


def _split_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` address; ``None`` for ``"auto"``/``ray://``."""
    if address in ("auto", "local") or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InvalidArgument(
            f"a Ray address must be 'host:port' (the head node's GCS address printed by "
            f"`ray start --head`, default port 6379), 'auto' or 'ray://host:port', got {address!r}"
        )
    return host.strip("[]"), int(port)


def _probe(host: str, port: int, timeout: float) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise RayConnectionError(
            f"no Ray cluster answers at {host}:{port} ({type(exc).__name__}: {exc}); start one "
            "with `ray start --head` on that machine (it prints the address to use), or check "
            "the host, the port and any firewall between here and there"
        ) from exc


def connect(address: str | None = None, *, timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
            **init_kwargs: Any) -> Any:
    """Make sure this process is connected to Ray; return the ``ray`` module.

    Already connected (``ray.init`` was called, e.g. by the trainer): that connection
    is used, and ``address``, when given, must be its address. Else ``address=None``
    connects to the cluster named by ``RAY_ADDRESS`` or starts a local one (Ray's own
    rule), and a ``host:port`` address is first probed over TCP, so a wrong address
    fails in ``timeout`` seconds instead of Ray's minutes of retries.

    A local cluster started here listens on 127.0.0.1 only: when Ray is not imported yet,
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set first (unless the environment sets it),
    which makes Ray bind and advertise loopback; otherwise Ray binds every interface. If
    Ray was imported before without it, a `UserWarning` says so. To offer a cluster to
    other machines, start it with ``ray start --head`` and pass its address.

    Args:
        address: ``None``, ``"auto"``, ``"host:port"`` or ``"ray://host:port"``.
        timeout: seconds to wait for the cluster (``None``/``math.inf``: forever).
        **init_kwargs: passed to ``ray.init`` (e.g. ``runtime_env``, ``namespace``).

    Raises:
        DependencyNotInstalled: Ray is not installed (``pip install "gem-core[ray]"``).
        RayConnectionError: nothing answers at ``address``, or it does not answer as a
            Ray cluster within ``timeout`` seconds.
        InvalidArgument: a malformed address, or another cluster is already connected.
    """
    local = address is None and not os.environ.get("RAY_ADDRESS")
    if local and "ray" not in sys.modules:
        os.environ.setdefault(RAY_LOOPBACK_ENV, "0")  # read when Ray is imported
    ray = import_ray()
    if local and not ray.is_initialized() and os.environ.get(RAY_LOOPBACK_ENV) != "0":
        warnings.warn(
            f"gem_core.distributed.connect: starting a local Ray cluster that listens on every "
            f"interface (Ray was imported before {RAY_LOOPBACK_ENV}=0 was set); set it before "
            "the first `import ray` to keep the cluster on 127.0.0.1",
            stacklevel=2,
        )
    if ray.is_initialized():
        if address not in (None, "auto"):
            current = ray.get_runtime_context().gcs_address
            if _split_address(address) not in (None, _split_address(current)):
                raise InvalidArgument(
                    f"this process is already connected to the Ray cluster at {current}, not "
                    f"{address!r}; pass address=None to use the connected cluster, or "
                    "ray.shutdown() first"
                )
        return ray
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout!r}")
    wait = None if timeout is None or math.isinf(timeout) else float(timeout)
    target = address or os.environ.get("RAY_ADDRESS") or None
    if target is None:  # starts a local cluster: nothing to wait for but Ray itself
        ray.init(**init_kwargs)
        return ray
    parts = _split_address(target)
    if parts is not None:
        _probe(*parts, timeout=wait if wait is not None else DEFAULT_CONNECT_TIMEOUT)
    outcome: dict[str, BaseException] = {}

    def init() -> None:
        try:
            ray.init(address=address, **init_kwargs)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    # ray.init retries for minutes against an address that accepts TCP but is not a
    # Ray cluster; it runs in a daemon thread so that the caller's wait is bounded.
    thread = threading.Thread(target=init, name="gem-ray-connect", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        raise RayConnectionError(
            f"the Ray cluster at {target} did not answer within "
            f"{wait:g} s (the port is open, but no Ray GCS replied); check that the address is "
            "the head node's (printed by `ray start --head`), or raise timeout=..."
        )
    if "error" in outcome:
        error = outcome["error"]
        raise RayConnectionError(
            f"could not connect to the Ray cluster at {target}: "
            f"{type(error).__name__}: {error}"
        ) from error
    return ray
