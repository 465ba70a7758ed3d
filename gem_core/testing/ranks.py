"""Data-parallel ranks on the CPU for multi-rank tests: spawned processes, one pipe each.

A trainer's data-parallel path is tested by running its ranks as real processes (``spawn``,
so no state of the test process leaks in) that talk to the test over pipes. `RankProcesses`
starts them and gets their messages; a rank that hangs or dies fails the test with the rank,
the wait and its exit code, never a hang of the test run. In each rank, `reporting` sends any
exception back as ``("error", traceback)`` and tears down the process group; `gloo_group`
joins a gloo group on loopback through a file rendezvous (no TCP store, no interface address)::

    def rank_main(rank, conn, store):           # module level: spawn imports it
        with reporting(conn):
            gloo_group(rank, 2, store)
            conn.send(("ok", compute_on_my_shard(rank)))

    with RankProcesses(rank_main, 2, args=(str(tmp_path / "store"),)) as ranks:
        results = [ranks.recv(r) for r in range(2)]

Messages are ``(status, payload)`` pairs: ``recv`` wants ``"ok"`` and returns the payload,
``recv_status`` returns any status but ``"error"`` with its payload. Importing this module
does not import torch.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

__all__ = ["RankProcesses", "gloo_group", "reporting"]


class RankProcesses:
    """``world_size`` spawned processes running ``target(rank, conn, *args)``, one pipe each.

    Args:
        target: a module-level function (``spawn`` pickles it by reference).
        world_size: number of ranks, ``>= 1``.
        args: more arguments for ``target`` (picklable).
        timeout_s: the longest wait for one message from a rank, and for each rank to exit.
    """

    def __init__(self, target: Callable[..., Any], world_size: int, *, args: Sequence[Any] = (), timeout_s: float = 60.0):
        if int(world_size) < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size!r}")
        if not float(timeout_s) > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.world_size = int(world_size)
        self.timeout_s = float(timeout_s)
        ctx = multiprocessing.get_context("spawn")
        self._pipes = [ctx.Pipe() for _ in range(self.world_size)]
        self._procs = [
            ctx.Process(target=target, args=(r, self._pipes[r][1], *args), daemon=True) for r in range(self.world_size)
        ]
        self._started = False

    def start(self) -> RankProcesses:
        for proc, (_, child_end) in zip(self._procs, self._pipes, strict=True):
            proc.start()
            child_end.close()  # the child holds it now: its death closes the pipe
        self._started = True
        return self

    def __enter__(self) -> RankProcesses:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close(join=exc[0] is None)

    def send(self, rank: int, message: Any) -> None:
        """Send ``message`` to ``rank`` (its ``conn.recv()``)."""
        self._pipes[rank][0].send(message)

    def recv_status(self, rank: int) -> tuple[str, Any]:
        """The next ``(status, payload)`` from ``rank``.

        Raises:
            AssertionError: the rank sent nothing in ``timeout_s`` (hung), died without a
                reply (its exit code), or sent ``("error", traceback)``.
        """
        conn, proc = self._pipes[rank][0], self._procs[rank]
        try:
            if not conn.poll(self.timeout_s):
                raise AssertionError(f"rank {rank} sent nothing in {self.timeout_s:g} s (hung)")
            status, payload = conn.recv()
        except EOFError:
            proc.join(self.timeout_s)
            raise AssertionError(f"rank {rank} died (exit code {proc.exitcode}) without a reply") from None
        if status == "error":
            raise AssertionError(f"rank {rank} failed:\n{payload}")
        return status, payload

    def recv(self, rank: int) -> Any:
        """The payload of the next ``("ok", payload)`` from ``rank`` (see `recv_status`)."""
        status, payload = self.recv_status(rank)
        if status != "ok":
            raise AssertionError(f"rank {rank} sent status {status!r}, not 'ok': {payload!r}")
        return payload

    def close(self, *, join: bool = True) -> None:
        """Wait up to ``timeout_s`` for each rank to exit (with ``join``), then kill what is left."""
        if not self._started:
            return
        for proc in self._procs:
            if join:
                proc.join(self.timeout_s)
            if proc.is_alive():
                proc.kill()
                proc.join(self.timeout_s)
        for parent_end, _ in self._pipes:
            parent_end.close()


@contextlib.contextmanager
def reporting(conn: Any) -> Iterator[None]:
    """In a rank: any exception goes back as ``("error", traceback)``; the process group (if
    one was made) is destroyed at the end."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            conn.send(("error", traceback.format_exc()))
    finally:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def gloo_group(rank: int, world_size: int, store: str, *, timeout_s: float = 60.0) -> None:
    """Join a gloo process group through the rendezvous file ``store`` (a path no other group
    uses), rank-to-rank traffic on loopback only; collectives time out after ``timeout_s``."""
    import torch.distributed as dist

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=int(rank),
        world_size=int(world_size),
        timeout=timedelta(seconds=float(timeout_s)),
    )
