"""`Sandbox`: a thread-safe pool of warm, isolated Python zygotes that fork one child per run."""

from __future__ import annotations

import asyncio
import atexit
import collections
import itertools
import json
import os
import queue
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gem_core._closing import Closing
from gem_core.errors import InvalidArgument, SandboxClosed, SandboxError, SandboxUnavailable
from gem_core.sandbox import isolation as _isolation
from gem_core.sandbox._server import remove_path
from gem_core.sandbox._trash import Trash
from gem_core.sandbox.isolation import (  # noqa: F401 - re-exported: their old import path
    Isolation,
    ReducedIsolationWarning,
    detect_isolation,
)

__all__ = ["Sandbox", "ExecResult", "DEFAULT_PRELOAD"]

DEFAULT_PRELOAD: tuple[str, ...] = (
    "math", "itertools", "collections", "re", "json", "functools", "random", "string",
    "fractions", "decimal", "statistics", "heapq", "bisect", "datetime", "numpy", "numpy.random",
)
"""Modules imported once in each zygote (missing optional ones, e.g. numpy, are skipped;
``numpy.random`` is imported lazily by numpy 2, which costs each run that uses it ~15 ms)."""

_HEADER = struct.Struct(">I")
_MAX_REPLY_BYTES = 64 << 20  # a reply larger than this is a protocol error (caps are far lower)
_GRACE_S = 2.0  # how long past its own deadline a zygote may take to answer before it is killed
_CLEANUP_S = 30.0  # how long a zygote may take to tidy up after a run before it is replaced
_SERVER_SOURCE = (Path(__file__).with_name("_server.py")).read_text()
# Threads of numeric libraries must not start in the zygote: it forks, and a fork copies
# locks held by other threads.
_SANDBOX_ENV = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "0",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "USER": "sandbox",
    "LOGNAME": "sandbox",
}
# What the zygote keeps of root's power under bubblewrap: enough to drop each execution to
# its own uid, kill what it leaves behind and delete its files. Executions keep nothing.
_ZYGOTE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_DAC_OVERRIDE", "CAP_FOWNER")


@dataclass(frozen=True, slots=True)
class ExecResult:
    """The outcome of one sandboxed execution.

    Attributes:
        stdout: what the code printed (head and tail kept beyond ``max_output_bytes``,
            joined by a ``... [N bytes truncated] ...`` marker).
        stderr: its error output (tracebacks), capped the same way.
        exit_code: 0 on success, 1 for an uncaught exception, the ``sys.exit`` code, or
            minus the signal number when it was killed (e.g. ``-9``).
        timed_out: the wall-clock timeout hit and the execution was killed.
        truncated: stdout or stderr was longer than the cap.
        duration_s: wall-clock seconds of the execution, measured by the host.
        sandbox_error: set when the sandbox itself failed during this run (its worker died
            or broke the protocol); the worker has been replaced.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    sandbox_error: str | None = None

    @property
    def ok(self) -> bool:
        """Exit code 0, no timeout, no sandbox failure."""
        return self.exit_code == 0 and not self.timed_out and self.sandbox_error is None


def _memory_cgroup_root() -> tuple[str, str] | None:
    """``(version, directory)`` under which this process may create memory cgroups, or
    ``None``: cgroup v2 when our cgroup delegates the memory controller to children, else
    a writable v1 memory hierarchy."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    own = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["<v2>"]:
            own[name] = path
    for fields in mounts:
        if " - " not in " ".join(fields):
            continue
        sep = fields.index("-")
        fstype, options = fields[sep + 1], fields[-1].split(",")
        mount_point = fields[4]
        if fstype == "cgroup2" and "<v2>" in own:
            base = os.path.join(mount_point, own["<v2>"].lstrip("/"))
            try:
                with open(os.path.join(base, "cgroup.subtree_control")) as f:
                    delegated = "memory" in f.read().split()
            except OSError:
                continue
            if delegated and os.access(base, os.W_OK):
                return "v2", base
        elif fstype == "cgroup" and "memory" in options and "memory" in own:
            base = os.path.join(mount_point, own["memory"].lstrip("/"))
            if os.path.isfile(os.path.join(base, "memory.limit_in_bytes")) and os.access(base, os.W_OK):
                return "v1", base
    return None


class _MemoryCgroup:
    """The memory cgroup of one slot: its zygote and every process of its runs."""

    def __init__(self, version: str, path: str):
        self.version = version
        self.path = path
        os.makedirs(path, exist_ok=True)
        self.procs = os.path.join(path, "cgroup.procs")

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def usage(self) -> int:
        name = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        with open(os.path.join(self.path, name)) as f:
            return int(f.read())

    def limit(self, nbytes: int | None) -> None:
        """Cap memory (and swap) of everything in the cgroup; ``None`` lifts the cap."""
        if self.version == "v2":
            self._write("memory.max", "max" if nbytes is None else str(nbytes))
            try:
                self._write("memory.swap.max", "max" if nbytes is None else "0")
            except OSError:
                pass
            return
        value = "-1" if nbytes is None else str(nbytes)
        swap = os.path.join(self.path, "memory.memsw.limit_in_bytes")
        if nbytes is None and os.path.exists(swap):
            self._write("memory.memsw.limit_in_bytes", value)  # lift the larger one first
        self._write("memory.limit_in_bytes", value)
        if nbytes is not None and os.path.exists(swap):
            try:
                self._write("memory.memsw.limit_in_bytes", value)
            except OSError:
                pass

    def remove(self) -> None:
        for _ in range(50):  # the last processes may still be exiting
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def capped_memory_cgroup(name: str, nbytes: int) -> _MemoryCgroup | None:
    """A new memory cgroup ``name`` capped at ``nbytes`` (swap included), or ``None`` where
    this host does not let us make and cap one (`_memory_cgroup_root`)."""
    root = _memory_cgroup_root()
    if root is None:
        return None
    cgroup = None
    try:
        cgroup = _MemoryCgroup(root[0], os.path.join(root[1], name))
        cgroup.limit(nbytes)
    except (OSError, ValueError):
        if cgroup is not None:
            cgroup.remove()
        return None
    return cgroup


_UID_BLOCKS: set[int] = set()  # uid blocks held by this process's pools
_UID_LOCK = threading.Lock()
_UID_BLOCKS_PER_PROCESS = 64
_UIDS_PER_POOL = 64


def _take_uid_block() -> int:
    """A block of `_UIDS_PER_POOL` uids no other pool of this host process uses: from the
    pid (other processes) and a per-process index (other pools here)."""
    with _UID_LOCK:
        free = [i for i in range(_UID_BLOCKS_PER_PROCESS) if i not in _UID_BLOCKS]
        if not free:
            raise SandboxError(
                f"more than {_UID_BLOCKS_PER_PROCESS} Sandbox pools are open in this process; "
                "close some (or share one: the pool is thread-safe)")
        _UID_BLOCKS.add(free[0])
        block = (os.getpid() % (1 << 19)) * _UID_BLOCKS_PER_PROCESS + free[0]
        return 1_000_000 + block * _UIDS_PER_POOL


def _release_uid_block(base: int) -> None:
    with _UID_LOCK:
        _UID_BLOCKS.discard(((base - 1_000_000) // _UIDS_PER_POOL) % _UID_BLOCKS_PER_PROCESS)


_POOL_IDS = itertools.count()  # names the cgroups of each pool of this process


# ----------------------------------------------------------------------------- worker

_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawn(cmd: list[str], **kwargs: Any) -> subprocess.Popen:
    """``Popen`` from one long-lived thread.

    ``bwrap --die-with-parent`` uses ``PR_SET_PDEATHSIG``, which fires when the *thread*
    that forked it exits; a zygote started from a short-lived thread (``asyncio.to_thread``,
    `Sandbox.warm_up`) would be killed with it.
    """
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-sandbox-spawner")
    return _SPAWNER.submit(subprocess.Popen, cmd, **kwargs).result()


def _forget_spawner_after_fork() -> None:
    """In a forked child: what the parent's threads held is not ours.

    The executor comes without its thread (a new one starts on demand); a lock another
    thread held at the fork would stay locked for good; the uid blocks are the parent's
    pools' (unusable here: `Sandbox` refuses to run in a process that did not create it,
    and the child's own pools take uids from its own pid).
    """
    global _SPAWNER, _SPAWNER_LOCK, _UID_LOCK
    _SPAWNER, _SPAWNER_LOCK = None, threading.Lock()
    _UID_LOCK = threading.Lock()
    _UID_BLOCKS.clear()


os.register_at_fork(after_in_child=_forget_spawner_after_fork)


class _Worker:
    """One pool slot: a zygote process and the pipes to it (used by one thread at a time)."""

    def __init__(self, pool: Sandbox, slot: int):
        self.pool = pool
        self.slot = slot
        self.proc: subprocess.Popen | None = None
        self.stderr_file: Any = None
        self.cleaning = False  # the zygote is tidying up after a run; an idle frame follows
        self.cgroup: _MemoryCgroup | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        pool = self.pool
        config = dict(pool._zygote_config)
        if pool._drop_uid_base is not None:
            config["drop_uid"] = pool._drop_uid_base + self.slot % _UIDS_PER_POOL
        if pool._base_dir is not None:  # each slot wipes a dir of its own after each run
            slot_dir = os.path.join(pool._base_dir, f"slot-{self.slot}")
            pool._trash.discard(slot_dir)  # what a replaced zygote left: off the critical path
            os.makedirs(slot_dir, exist_ok=True)
            os.chmod(slot_dir, 0o1777 if os.geteuid() == 0 else 0o700)
            config["base_dir"] = slot_dir
            config["clean_dirs"] = [slot_dir]
        prefix, pass_fds = list(pool._prefix), ()
        if pool._seccomp is not None:
            from gem_core.sandbox.seccomp import filter_fd

            seccomp_fd = filter_fd(pool._seccomp)
            prefix += ["--seccomp", str(seccomp_fd)]
            pass_fds = (seccomp_fd,)
        cmd = [*prefix, sys.executable, "-I", "-c", _SERVER_SOURCE, json.dumps(config)]
        if pool._cgroup_root is not None:
            # The zygote starts inside its slot's memory cgroup (a shell joins it, then
            # execs the isolation layer), so every process of every run is counted there.
            if self.cgroup is None:
                version, root = pool._cgroup_root
                self.cgroup = _MemoryCgroup(version, os.path.join(root, f"{pool._cgroup_name}-{self.slot}"))
            self.cgroup.limit(None)
            cmd = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self.cgroup.procs, *cmd]
        self.stderr_file = tempfile.TemporaryFile()
        try:
            self.proc = _spawn(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file,
                env=pool._popen_env, cwd=pool._base_dir or "/", start_new_session=True,
                pass_fds=pass_fds,
            )
        finally:
            for fd in pass_fds:
                os.close(fd)
        deadline = time.monotonic() + pool.start_timeout_s
        reply = self._read_frame(deadline)
        if not isinstance(reply, dict) or not reply.get("ready"):
            why = "no ready message" if reply is None else f"unexpected first message {str(reply)[:200]!r}"
            err = self._stderr_tail()
            self.kill()
            raise SandboxError(
                f"sandbox worker (isolation={pool.isolation}) failed to start: {why}."
                + (f" Its stderr: {err}" if err else "")
                + " Try Sandbox(isolation='rlimits') to check whether the isolation layer is the cause."
            )
        if self.cgroup is not None:
            # Runs share memory_mb on top of what the idle zygote holds.
            try:
                self.cgroup.limit(self.cgroup.usage() + pool._memory_bytes)
            except (OSError, ValueError) as e:
                self.kill()
                raise SandboxError(f"sandbox worker: cannot set the memory limit of its cgroup {self.cgroup.path}: {e}") from None
        self.preloaded = reply.get("preloaded", [])
        self.cleaning = False

    def wait_idle(self) -> None:
        """Wait until the zygote has tidied up after its last run; replace it if it cannot.

        A run's deadline starts after this, so a slow cleanup never eats into it.
        """
        if not self.cleaning:
            return
        self.cleaning = False
        try:
            frame = self._read_frame(time.monotonic() + _CLEANUP_S)
        except (TimeoutError, OSError, ValueError):
            frame = None
        if not (isinstance(frame, dict) and frame.get("idle") is True):
            self.kill()  # it could not clean up (or hung doing so): a fresh one takes over
            self.start()
            return
        self.pool._note_phases(frame.get("phases"), "cleanup_")

    def _stderr_tail(self) -> str:
        try:
            self.stderr_file.seek(0)
            return self.stderr_file.read()[-2000:].decode(errors="replace").strip()
        except (OSError, ValueError, AttributeError):
            return ""

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.stderr_file is not None:
            self.stderr_file.close()
            self.stderr_file = None

    def _read_exact(self, n: int, deadline: float) -> bytes | None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        parts: list[bytes] = []
        while n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                return None
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def _read_frame(self, deadline: float) -> Any:
        head = self._read_exact(_HEADER.size, deadline)
        if head is None:
            return None
        size = _HEADER.unpack(head)[0]
        if size > _MAX_REPLY_BYTES:
            raise ValueError(f"reply of {size} bytes exceeds the {_MAX_REPLY_BYTES}-byte limit")
        body = self._read_exact(size, deadline)
        if body is None:
            return None
        try:
            return json.loads(body)
        except RecursionError:  # nested past the decoder's limit: no reply of ours is
            raise ValueError("reply nested too deeply") from None

    def execute(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one request; return the zygote's reply or ``{"sandbox_error": why}``."""
        assert self.proc is not None and self.proc.stdin is not None
        data = json.dumps(request).encode()
        try:
            self.proc.stdin.write(_HEADER.pack(len(data)) + data)
            self.proc.stdin.flush()
            reply = self._read_frame(deadline)
        except TimeoutError:
            self.kill()
            return {"sandbox_error": "the sandbox worker did not answer in time; it was replaced",
                    "timed_out": True}
        except (OSError, ValueError) as e:
            self.kill()
            return {"sandbox_error": f"the sandbox worker broke the protocol ({e}); it was replaced"}
        if reply is None or not isinstance(reply, dict) or "error" in reply or not _valid_reply(reply):
            if reply is None:
                why = "died"
            elif isinstance(reply, dict) and "error" in reply:
                why = f"failed: {str(reply['error'])[:300]}"
            else:
                why = f"sent a malformed reply ({str(reply)[:100]!r})"
            self.kill()
            return {"sandbox_error": f"the sandbox worker {why} during the execution; it was replaced"}
        self.cleaning = True
        return reply


_REPLY_TYPES = {"stdout": str, "stderr": str, "exit_code": int, "timed_out": bool,
                "truncated": bool, "duration_s": (int, float)}


def _valid_reply(reply: dict[str, Any]) -> bool:
    return all(isinstance(reply.get(key), kinds) for key, kinds in _REPLY_TYPES.items())


# ----------------------------------------------------------------------------- pool


class Sandbox(Closing):
    """A pool of warm, isolated Python workers; each `run` forks a fresh, limited child.

    Each slot holds a long-lived "zygote" process started inside the isolation layer with
    common modules pre-imported (`DEFAULT_PRELOAD`). A run forks a child of it that gets a
    new session, a fresh work dir (its ``$HOME`` and cwd), a scrubbed environment, rlimits
    and fresh stdin/stdout/stderr pipes. The zygote enforces the wall-clock timeout (the
    child's process group and everything it left behind are killed), keeps the head and
    tail of each output stream, and answers the host in JSON, which the host parses as
    hostile text (bounded size and depth, checked types); it never unpickles anything
    from the sandbox. After answering, off the critical path, the zygote kills what the run
    left, removes its files (iteratively: any depth), wipes the private ``/tmp``,
    ``/dev/shm`` and ``/dev/mqueue`` and removes the SysV IPC objects (shared memory,
    message queues, semaphores) left in its IPC namespace, then forks the next child and
    reports itself idle; a run's deadline starts only then. Cleanup cannot kill a zygote:
    one that cannot clean up, dies, hangs or misbehaves is killed and replaced; the pool
    keeps serving.

    Isolation levels (`isolation` says which is in force):

    * ``"bwrap"`` (needs bubblewrap on ``PATH``; Yama is not needed): no network; new
      pid, ipc, uts and mount namespaces; read-only ``/usr`` and Python installation,
      with the installed ``gem_core`` package (its data samples hold answers), an
      editable checkout inside a bound dir and ``$GEM_DATA_DIR``/Hugging Face cache dirs
      inside it masked by empty dirs; no ``/etc/passwd`` or ``$HOME``; a private ``/tmp``
      tmpfs of ``tmp_mb`` MiB; ``--clearenv``; a seccomp filter (where bubblewrap accepts
      it, `gem_core.sandbox.seccomp`) that fails ``ptrace``, ``process_vm_*``,
      ``pidfd_getfd`` & co. and the creation of user namespaces. When the host runs as
      root, the zygote keeps only the capabilities to drop each run to a uid of its slot
      (a block of 64 per pool, unique per pool and host process), so ``max_processes``
      is exact and the code cannot signal the zygote.
    * ``"netns"``: no bubblewrap, but ``unshare`` gives private network, pid and IPC
      namespaces (POSIX message queues are not wiped at this level).
    * ``"rlimits"``: limits only; SysV IPC objects are removed only when runs have a uid
      of their own. Both lower levels see the host's file system; a single
      `ReducedIsolationWarning` says so. Known gap (rlimits level, non-root host or a
      Python the dropped uid cannot read): a grandchild that calls ``setsid`` escapes the
      process-group kill and outlives its execution (still bounded by RLIMIT_CPU).

    Memory (`memory_scope`): where this host lets the pool create a memory cgroup (cgroup
    v2 with the memory controller delegated to our cgroup, or a writable v1 memory
    hierarchy; typically as root) each slot's zygote starts in its own, capped at the idle
    zygote's usage plus ``memory_mb``: all processes of a run, and what it writes to
    ``/tmp``, share ``memory_mb`` (``"run"``; the OOM killer takes a run's processes, which
    then exit with -9). Elsewhere the bound is per process (``"process"``): a run may hold
    up to ``max_processes`` x ``memory_mb``, so ``max_processes`` defaults to 16 there
    instead of 64.

    Args:
        size: number of slots (concurrent executions); default ``min(4, max(2, cpus))``.
        isolation: ``"auto"`` (the strongest available) or a level to require
            (`SandboxUnavailable` when it does not work here).
        cpu_s: CPU seconds per execution (RLIMIT_CPU).
        memory_mb: address space per process in MiB on top of what the preloaded
            zygote maps (RLIMIT_AS; so the choice of ``preload`` does not eat into it) and,
            with a memory cgroup, the memory of all processes of a run together (on top of
            what the idle zygote holds).
        max_processes: processes per execution (RLIMIT_NPROC; exact when the host is root,
            otherwise added to the user's process count at start-up); default 64 with a
            memory cgroup, 16 without.
        file_size_mb: largest file an execution may write (RLIMIT_FSIZE).
        tmp_mb: size of the private ``/tmp`` (bubblewrap); default ``4 * file_size_mb``.
        max_open_files: RLIMIT_NOFILE.
        timeout_s: default wall-clock timeout of `run`.
        max_output_bytes: bytes kept per output stream (half head, half tail).
        preload: modules each zygote imports once.
        start_timeout_s: how long a zygote may take to start.

    Attributes:
        isolation: the level in force.
        memory_scope: ``"run"`` or ``"process"`` (above).
        max_processes, tmp_mb: the limits in force.

    Thread-safe; `arun` serves asyncio. `close` is idempotent and also runs at exit.
    """

    def __init__(
        self,
        *,
        size: int | None = None,
        isolation: Literal["auto"] | Isolation = "auto",
        cpu_s: float = 10,
        memory_mb: int = 1024,
        max_processes: int | None = None,
        file_size_mb: int = 16,
        tmp_mb: int | None = None,
        max_open_files: int = 256,
        timeout_s: float = 10,
        max_output_bytes: int = 64 * 1024,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        start_timeout_s: float = 60,
    ):
        if size is None:
            size = min(4, max(2, os.cpu_count() or 2))
        if tmp_mb is None:
            tmp_mb = 4 * int(file_size_mb)
        for name, value in (("size", size), ("cpu_s", cpu_s), ("memory_mb", memory_mb),
                            ("max_processes", 1 if max_processes is None else max_processes),
                            ("file_size_mb", file_size_mb), ("tmp_mb", tmp_mb),
                            ("max_open_files", max_open_files), ("timeout_s", timeout_s),
                            ("max_output_bytes", max_output_bytes)):
            if not value > 0:
                raise InvalidArgument(f"Sandbox({name}=...) must be positive, got {value!r}")
        if sys.platform != "linux":
            raise SandboxUnavailable(
                f"gem_core.sandbox needs Linux (fork, rlimits, namespaces); this is {sys.platform}")
        level = _isolation.resolve_isolation(
            isolation, owner="Sandbox", runs="sandboxed code runs",
            exposure="it can read the host's files that its user may read")
        self.isolation: Isolation = level
        self.size = int(size)
        self.timeout_s = float(timeout_s)
        self.cpu_s = float(cpu_s)
        self.start_timeout_s = float(start_timeout_s)
        root = os.geteuid() == 0
        self._base_dir: str | None = None
        if level == "bwrap":
            base, clean = "/tmp", ["/tmp", "/dev/shm", "/dev/mqueue"]
        else:
            self._base_dir = tempfile.mkdtemp(prefix="gem-sandbox-")
            os.chmod(self._base_dir, 0o1777 if root else 0o700)
            base, clean = self._base_dir, []
        # A root host drops every execution to a uid of its own slot (unique per host pid),
        # so RLIMIT_NPROC counts only that execution's processes.
        # Without bubblewrap (which re-creates the parents world-readable) that uid must be
        # able to read the Python installation; under e.g. a 0700 /root it cannot, and the
        # executions keep the host's uid (NPROC then does not bind root: reduced isolation).
        can_drop = root and (level == "bwrap" or all(_isolation.others_can_read(p) for p in _isolation.python_dirs()))
        # The uids of a pool: unique per host pid and per pool within the process.
        self._drop_uid_base = _take_uid_block() if can_drop else None
        # Memory: a cgroup per slot bounds all processes of a run together, where this
        # host lets us create one; otherwise the bound is processes x memory_mb.
        self._cgroup_name = f"gem-sandbox-{os.getpid()}-{next(_POOL_IDS)}"
        probe = capped_memory_cgroup(f"{self._cgroup_name}-probe", int(memory_mb) << 20)  # can we here?
        self._cgroup_root = _memory_cgroup_root() if probe is not None else None
        if probe is not None:
            probe.remove()
        self._memory_bytes = int(memory_mb) << 20
        self.memory_scope: Literal["run", "process"] = "run" if self._cgroup_root else "process"
        if max_processes is None:
            max_processes = 64 if self._cgroup_root else 16
        self.max_processes = int(max_processes)
        self.tmp_mb = int(tmp_mb)
        nproc = int(max_processes) if can_drop else _isolation.count_user_processes(os.getuid()) + int(max_processes)
        self._seccomp = _isolation.seccomp_program()[0] if level == "bwrap" else None
        path = ":".join(dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]))
        env = dict(_SANDBOX_ENV, PATH=path, HOME=base, TMPDIR=base)
        self._popen_env = env
        if level == "bwrap":
            self._prefix = _isolation.bwrap_command(env, tmp_bytes=int(tmp_mb) << 20, caps=_ZYGOTE_CAPS)
        else:
            self._prefix = _isolation.unshare_command() if level == "netns" else []
        self._zygote_config = {
            "pidns": level in ("bwrap", "netns"),
            "ipcns": level in ("bwrap", "netns"),
            "base_dir": base,
            "clean_dirs": clean,
            "env": env,
            "preload": list(preload),
            "limits": {
                "cpu_s": float(cpu_s),
                "memory_bytes": int(memory_mb) << 20,
                "nproc": nproc,
                "fsize_bytes": int(file_size_mb) << 20,
                "nofile": int(max_open_files),
                "max_output_bytes": int(max_output_bytes),
            },
        }
        self._workers = [_Worker(self, slot) for slot in range(self.size)]
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        for worker in self._workers:
            self._idle.put(worker)
        self._closed = False
        self._lock = threading.Lock()
        self._trash = Trash(remove_path)  # what a replaced zygote left (no bubblewrap)
        self._phases: dict[str, collections.deque[float]] = {}  # see phase_times()
        # The zygotes, cgroups, base dir and uids belong to this process: a forked child
        # that exits (atexit, weakref finalizers) or drops the object must leave them be.
        self._owner_pid = os.getpid()
        self._finalizer = weakref.finalize(self, Sandbox._shutdown, self._workers, self._base_dir,
                                           self._drop_uid_base, self._owner_pid, self._trash)
        atexit.register(self._finalizer)

    # -- lifecycle ------------------------------------------------------------------


    def warm_up(self) -> None:
        """Start every slot's zygote now (in parallel) instead of at its first use."""
        self._check_open()
        errors: list[BaseException] = []

        def start(worker: _Worker) -> None:
            try:
                if not worker.alive:
                    worker.start()
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)

        taken = [self._idle.get() for _ in self._workers]
        try:
            threads = [threading.Thread(target=start, args=(w,)) for w in taken]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for w in taken:
                self._idle.put(w)
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Kill every zygote and remove the work dirs. Safe to call more than once.

        In a forked child of the process that created the pool it only marks this copy
        closed: the zygotes and files are the parent's.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._finalizer()
        atexit.unregister(self._finalizer)

    @staticmethod
    def _shutdown(workers: list[_Worker], base_dir: str | None, uid_base: int | None,
                  owner_pid: int, trash: Trash) -> None:
        if os.getpid() != owner_pid:
            return  # a forked child: nothing here is ours to tear down
        for worker in workers:
            worker.kill()
            if worker.cgroup is not None:
                worker.cgroup.remove()
        trash.wait()
        if base_dir:
            remove_path(base_dir)
        if uid_base is not None:
            _release_uid_block(uid_base)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Sandbox(size={self.size}, isolation={self.isolation!r}, {state})"

    # -- running ----------------------------------------------------------------------

    def run(
        self,
        code: str,
        *,
        stdin: str | None = None,
        timeout: float | None = None,
        prelude: Sequence[str] = (),
    ) -> ExecResult:
        """Run ``code`` in a fresh, isolated child of a warm worker.

        Args:
            code: Python source, run as ``__main__``.
            stdin: text fed to the code's standard input (closed after it).
            timeout: wall-clock seconds (default: the pool's ``timeout_s``); the child and
                everything it started are killed when it passes, within about 0.1 s.
            prelude: cells run first in the same namespace with their output discarded and
                their exceptions ignored (how `PythonCodeTool` replays a persistent session).

        Returns:
            The `ExecResult`. Problems of the code (exceptions, limits, timeouts) are
            reported in it; this method raises only for misuse.

        Raises:
            SandboxClosed: the sandbox was closed.
            SandboxError: a worker cannot be (re)started.
        """
        if not isinstance(code, str):
            raise InvalidArgument(f"Sandbox.run(code) expects a str of Python source, got {type(code).__name__}")
        timeout = self.timeout_s if timeout is None else float(timeout)
        if not timeout > 0:
            raise InvalidArgument(f"Sandbox.run(timeout=...) must be positive, got {timeout!r}")
        self._check_open()
        called = time.monotonic()
        worker = self._idle.get()
        try:
            self._check_open()
            if not worker.alive:
                worker.kill()  # reap a dead one, then replace it
                worker.start()
            worker.wait_idle()
            request = {"code": code, "prelude": list(prelude), "stdin": stdin, "timeout": timeout,
                       "cpu_s": min(self.cpu_s, timeout + 1)}
            start = time.monotonic()
            reply = worker.execute(request, start + timeout + _GRACE_S)
            duration = time.monotonic() - start
        finally:
            self._idle.put(worker)
        if "sandbox_error" not in reply:
            self._note_phases(reply.get("phases"), "")
            self._note_phases({"slot_wait": start - called, "transport": duration - reply["duration_s"]}, "")
        if "sandbox_error" in reply:
            if self._closed:
                raise SandboxClosed("the sandbox was closed while this execution was running")
            return ExecResult(stdout="", stderr=reply["sandbox_error"], exit_code=-1,
                              timed_out=bool(reply.get("timed_out")), duration_s=duration,
                              sandbox_error=reply["sandbox_error"])
        return ExecResult(
            stdout=str(reply.get("stdout", "")),
            stderr=str(reply.get("stderr", "")),
            exit_code=int(reply.get("exit_code", -1)),
            timed_out=bool(reply.get("timed_out")),
            truncated=bool(reply.get("truncated")),
            duration_s=duration,
        )

    def phase_times(self) -> dict[str, list[float]]:
        """Seconds per phase of the last runs (up to 1,024 each), for profiling.

        ``slot_wait``: waiting for a free slot and for its zygote's cleanup after its last
        run; ``transport``: the request and reply between this process and the zygote;
        ``spare_wait``: the zygote waiting for its pre-forked child to finish setting itself
        up; ``child``: the child reading the request, running the code and reporting its
        exit; ``finish``: killing what the run left and collecting its output. Off the
        critical path, after the reply (``cleanup_*``): ``reap`` (the run's processes),
        ``files`` (its work dir and the private ``/tmp``), ``ipc`` (SysV objects) and
        ``fork`` (the next run's child).
        """
        return {name: list(values) for name, values in self._phases.items()}

    def _note_phases(self, phases: Any, prefix: str) -> None:
        if not isinstance(phases, dict):
            return
        for name, value in phases.items():
            if isinstance(name, str) and len(name) <= 32 and type(value) in (int, float):
                record = self._phases.get(prefix + name)
                if record is None:
                    if len(self._phases) >= 64:
                        continue
                    record = self._phases.setdefault(prefix + name, collections.deque(maxlen=1024))
                record.append(float(value))

    async def arun(
        self,
        code: str,
        *,
        stdin: str | None = None,
        timeout: float | None = None,
        prelude: Sequence[str] = (),
    ) -> ExecResult:
        """`run` for asyncio: the blocking wait happens in a worker thread."""
        return await asyncio.to_thread(self.run, code, stdin=stdin, timeout=timeout, prelude=prelude)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed("this Sandbox is closed; create a new one to run more code")
        if os.getpid() != self._owner_pid:
            raise SandboxError(
                f"this Sandbox was created by process {self._owner_pid} and inherited across a "
                f"fork by process {os.getpid()}; its workers serve the parent only: create a new "
                "Sandbox in the child")
