"""A baton passed between two worker processes, so their timed blocks alternate in time."""

# Timing ours and the reference one after the other lets the host's load drift between the
# two runs (on a shared 2-core machine rows moved by +-40 % between whole runs). In the
# interleaved phase run.py starts both workers at once, joined by two pipes in a ring:
# a worker measures only while it holds the baton (one byte), then hands it over, so the
# two sides take turns in short blocks and see the same machine.
#
# The baton never hangs a run: when the peer has exited (end of file) or does not hand the
# baton back within ``timeout_s``, the worker goes on alone and `broken` says so.

from __future__ import annotations

import os
import select
import time

__all__ = ["Baton", "BATON_ENV"]

BATON_ENV = "GEM_BENCH_BATON"  # "READ_FD,WRITE_FD", set by run.py for the interleaved phase


class Baton:
    """``with baton:`` waits for the turn, runs the block, hands the turn to the peer.

    Args:
        read_fd: the pipe end the turn arrives on.
        write_fd: the pipe end the turn leaves by.
        timeout_s: the longest wait for the turn before going on alone.

    Attributes:
        turns: blocks run while holding the baton.
        broken: why the worker went on alone (``None`` while the turns alternate).
        spans: ``(start, end)`` of each block, ``time.monotonic()`` (one clock for every
            process of the machine), so a test can check that the blocks alternate.
    """

    def __init__(self, read_fd: int | None, write_fd: int | None, timeout_s: float = 60.0):
        self.read_fd, self.write_fd, self.timeout_s = read_fd, write_fd, timeout_s
        self.turns = 0
        self.broken: str | None = None if read_fd is not None else "no peer"
        self.spans: list[tuple[float, float]] = []
        self._start = 0.0

    @classmethod
    def from_env(cls, timeout_s: float = 60.0) -> Baton:
        """The baton named by ``$GEM_BENCH_BATON``, or a lone one (no peer) when it is unset."""
        value = os.environ.get(BATON_ENV, "")
        if not value:
            return cls(None, None, timeout_s)
        read_fd, write_fd = (int(x) for x in value.split(","))
        return cls(read_fd, write_fd, timeout_s)

    def __enter__(self) -> Baton:
        if self.broken is None and self.read_fd is not None:
            ready, _, _ = select.select([self.read_fd], [], [], self.timeout_s)
            if not ready:
                self.broken = f"the peer kept the baton over {self.timeout_s:g} s"
            elif not os.read(self.read_fd, 1):
                self.broken = "the peer has finished"
        self._start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.spans.append((self._start, time.monotonic()))
        if self.broken is None and self.write_fd is not None:
            self.turns += 1
            try:
                os.write(self.write_fd, b"t")
            except OSError:  # BrokenPipeError: the peer has finished (after its last turn, as it should)
                pass  # mid-run, the next turn reads end of file and says so

    def close(self) -> None:
        """Close both ends: a peer waiting for the turn sees end of file and goes on alone."""
        for fd in (self.read_fd, self.write_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.read_fd = self.write_fd = None

    def report(self) -> dict:
        """What the result JSON records about the interleaving."""
        return {"turns": self.turns, "broken": self.broken, "spans": self.spans}
