"""gem_core.testing.ranks: spawned ranks over pipes; a hang, a death or an error fails clearly."""

from __future__ import annotations

import os
import time

import pytest

from gem_core.testing.ranks import RankProcesses, gloo_group, reporting


def _echo(rank, conn, base):
    with reporting(conn):
        conn.send(("ok", base + rank))
        conn.send(("ok", conn.recv() * 10 + rank))


def _raises(rank, conn):
    with reporting(conn):
        if rank == 1:
            raise KeyError("boom on rank one")
        conn.send(("ok", rank))


def _dies(rank, conn):
    os._exit(3)


def _hangs(rank, conn):
    time.sleep(60)


def _status(rank, conn):
    with reporting(conn):
        conn.send(("usage_error", f"rank {rank} says no"))


def _all_reduce(rank, conn, store):
    with reporting(conn):
        import torch
        import torch.distributed as dist

        gloo_group(rank, 2, store, timeout_s=30)
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        conn.send(("ok", (dist.get_world_size(), float(t))))


def test_messages_both_ways():
    with RankProcesses(_echo, 2, args=(100,), timeout_s=60) as ranks:
        assert [ranks.recv(r) for r in range(2)] == [100, 101]
        for r in range(2):
            ranks.send(r, 7)
        assert [ranks.recv(r) for r in range(2)] == [70, 71]


def test_an_exception_in_a_rank_comes_back_with_its_traceback():
    with pytest.raises(AssertionError, match=r"(?s)rank 1 failed:.*KeyError: 'boom on rank one'"):
        with RankProcesses(_raises, 2, timeout_s=60) as ranks:
            assert ranks.recv(0) == 0
            ranks.recv(1)


def test_a_dead_rank_names_its_exit_code():
    with pytest.raises(AssertionError, match=r"rank 0 died \(exit code 3\) without a reply"):
        with RankProcesses(_dies, 1, timeout_s=60) as ranks:
            ranks.recv(0)


def test_a_hung_rank_fails_after_the_timeout_and_is_killed():
    ranks = RankProcesses(_hangs, 1, timeout_s=1.0).start()
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"rank 0 sent nothing in 1 s \(hung\)"):
        ranks.recv(0)
    ranks.close(join=False)
    assert not ranks._procs[0].is_alive()
    assert time.monotonic() - t0 < 30


def test_other_statuses_come_back_with_recv_status_and_fail_recv():
    with RankProcesses(_status, 2, timeout_s=60) as ranks:
        assert ranks.recv_status(0) == ("usage_error", "rank 0 says no")
        with pytest.raises(AssertionError, match=r"rank 1 sent status 'usage_error', not 'ok'"):
            ranks.recv(1)


def test_gloo_group_on_a_file_rendezvous(tmp_path):
    pytest.importorskip("torch")
    with RankProcesses(_all_reduce, 2, args=(str(tmp_path / "store"),), timeout_s=60) as ranks:
        assert [ranks.recv(r) for r in range(2)] == [(2, 3.0), (2, 3.0)]


@pytest.mark.parametrize(("world", "timeout", "match"), [(0, 1, "world_size"), (1, 0, "timeout_s")])
def test_bad_arguments(world, timeout, match):
    with pytest.raises(ValueError, match=match):
        RankProcesses(_echo, world, timeout_s=timeout)
