"""`Shell`: bash commands in a per-episode workspace, isolated by bubblewrap (or rlimits).

Each `Shell.run` is one fresh ``bash -c`` inside its own sandbox; the only state that
survives between commands is the workspace directory (files). See `Shell` for the
isolation levels and limits.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gem_core._closing import Closing
from gem_core.errors import (
    InvalidArgument,
    ReducedIsolationWarning,
    SandboxClosed,
    SandboxUnavailable,
    check_positive_number,
)
from gem_core.sandbox import isolation as _isolation
from gem_core.sandbox._server import OutputCapture
from gem_core.sandbox._trash import Trash
from gem_core.sandbox.isolation import Isolation

__all__ = [
    "Shell",
    "ShellResult",
    "MAX_COMMAND_BYTES",
    "MAX_WORKSPACE_FILES",
    "WORKSPACE",
    "TASK_DIR",
]

WORKSPACE = "/workspace"
"""Where the workspace appears inside the bubblewrap sandbox (the cwd of every command)."""

TASK_DIR = "/task"
"""Where the read-only ``files`` of a `Shell.run` appear under bubblewrap (``$GEM_TASK_DIR``)."""

MAX_COMMAND_BYTES = 64 * 1024
"""Longest command `Shell.run` accepts (Linux caps one argv string at 128 KiB)."""

MAX_WORKSPACE_FILES = 10_000
"""Default of ``Shell(max_workspace_files=...)``: more entries than this (files,
directories and links, the workspace itself not counted) put the workspace over its limit;
it also bounds the cost of one measurement (tens of milliseconds at this size)."""

_DISK_POLL_S = 0.25  # how often a running (writable) command's workspace is measured, at most
_DRAIN_S = 0.2  # without a pid namespace: how long leftovers holding the pipe may delay a result
# Dropped uids (far from real users, and above the Python sandbox pools', which end below
# 2.15e9): 2.2e9 + pid * _UIDS_PER_PID + slot, two per live Shell (the agent's, the
# grader's). _UIDS_PER_PID is what fits below 2**32 - 1 for every pid up to pid_max (512,
# i.e. 256 live Shells, when pid_max is the default 32768; 498 at the 64-bit maximum of
# 2**22), so every host pid owns uids of its own; within a process a slot is held from
# the Shell's creation to its close, so no two live Shells ever share a uid.
_UID_BASE = 2_200_000_000


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return max(1, int(f.read()))
    except (OSError, ValueError):
        return 1 << 22  # the kernel's largest


_UIDS_PER_PID = min(512, (2**32 - 2 - _UID_BASE) // _pid_max()) & ~1
_UID_SLOTS: set[int] = set()  # the slots (pairs of uids) held by live Shells of this process
_UID_LOCK = threading.Lock()
_SHELL_IDS = itertools.count()
_WARNED_SECCOMP = False  # the missing-filter warning is given once per process
_SECCOMP_FD = "<seccomp fd>"  # placeholder in a bwrap argv, replaced by the fd of each run
_AGENT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")  # what setpriv needs to drop a run
# The grader (test driver) keeps these, as ambient capabilities of its own uid: to run the
# agent's programs as the agent (setuid/setgid/setpcap) and to read every file of the
# workspace whatever its mode (dac_read_search; open_by_handle_at is denied by seccomp).
_GRADER_CAPS = ("setuid", "setgid", "setpcap", "dac_read_search")

# Bash refuses to raise a hard limit, so the agent's command cannot undo these. Units: KiB
# for -f and -v (bash's defaults outside POSIX mode).
_LIMITS_SCRIPT = (
    'ulimit -S -H -c 0 -f "$GEM_FSIZE_KB" -v "$GEM_MEM_KB" -u "$GEM_NPROC" -n "$GEM_NOFILE" '
    '-t "$GEM_CPU_S" || { echo "gem shell: could not set resource limits" >&2; exit 126; }; '
    "unset GEM_FSIZE_KB GEM_MEM_KB GEM_NPROC GEM_NOFILE GEM_CPU_S; "
    'exec /bin/bash --noprofile --norc -c "$1"'
)


@dataclass(frozen=True, slots=True)
class ShellResult:
    """The outcome of one command.

    Attributes:
        output: stdout and stderr interleaved as written (one pipe), decoded as UTF-8
            with replacement; beyond ``max_output_bytes`` the head and tail are kept,
            joined by a ``... [N bytes truncated] ...`` line (the Python sandbox's marker).
        exit_code: the command's exit status (bash reports ``128 + n`` for a child killed
            by signal n), or minus the signal number when the whole sandbox was killed
            (``-9`` after a timeout).
        timed_out: the wall-clock timeout hit and every process of the command was killed.
        truncated: the output was longer than ``max_output_bytes``.
        total_bytes: how many output bytes the command wrote in all.
        duration_s: wall-clock seconds, sandbox start-up included.
        workspace_bytes: the workspace's disk use after the command (bytes in allocated
            blocks, ``du``-style), or ``None`` when it was not measured (a ``read_only``
            run, or both workspace limits off). Over the limit the count stops early, so
            it is then only a lower bound.
        workspace_files: the entries counted in the workspace (a lower bound when over
            the limit), or ``None`` when not measured.
        workspace_over_limit: the workspace went over ``max_workspace_mb`` or
            ``max_workspace_files`` (or could not be read to measure it). A command
            caught going over while it ran was killed (``exit_code`` ``-9``). The
            workspace is left as it is: the caller decides (`remove_workspace`).
    """

    output: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    total_bytes: int = 0
    duration_s: float = 0.0
    workspace_bytes: int | None = None
    workspace_files: int | None = None
    workspace_over_limit: bool = False

    @property
    def ok(self) -> bool:
        """Exit code 0 and no timeout."""
        return self.exit_code == 0 and not self.timed_out


_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FD_WINDOW = 64  # directory fds a walk keeps open on its current path; deeper ones reopen ".."
_VANISHED = (FileNotFoundError, NotADirectoryError)  # removed or replaced while a command runs


class _Moved(OSError):
    """A directory on a walk's current path was moved while the walk ran."""


class _Stop(Exception):
    """Raised by a visitor to end a walk early."""


@dataclass(slots=True)
class _Frame:
    fd: int | None
    dev: int
    ino: int
    name: str
    pending: list[str] | None = None


def _open_dir(name: str, dir_fd: int | None, fix_perms: bool) -> int:
    """Open the directory ``name`` (never through a symlink). With ``fix_perms``, one a
    command made unreadable (``chmod 000``, which stops a non-root host) is opened by
    giving its owner ``rwx`` for a moment; its mode is put back at once."""
    try:
        return os.open(name, _O_DIR, dir_fd=dir_fd)
    except PermissionError:
        if not fix_perms:
            raise
        mode = stat.S_IMODE(os.lstat(name, dir_fd=dir_fd).st_mode)
        os.chmod(name, mode | stat.S_IRWXU, dir_fd=dir_fd)
        try:
            return os.open(name, _O_DIR, dir_fd=dir_fd)
        finally:
            os.chmod(name, mode, dir_fd=dir_fd)


def _walk(
    top: str,
    visit: Callable[[int, str, os.stat_result], bool],
    leave: Callable[[int, str], None] | None = None,
    *,
    fix_perms: bool = True,
) -> None:
    """Walk the directory tree at ``top`` depth first, without recursion and by fds.

    Every name is resolved relative to its directory's file descriptor, so no path
    grows with the depth (no ``ENAMETOOLONG`` past 4,096 bytes, no ``RecursionError``
    at any depth) and no symlink is ever followed. At most `_FD_WINDOW` directory fds
    stay open: deeper directories are left by opening ``..``, checked to be the
    directory the walk came from (`_Moved` when a command moved it meanwhile).

    Args:
        top: the root of the tree (a directory; not itself visited).
        visit: ``visit(dir_fd, name, lstat)`` for each entry, in its directory's fd;
            return True to descend into it (only for a directory). It may remove the
            entry, or raise `_Stop` to end the walk.
        leave: ``leave(parent_fd, name)`` after a directory's whole subtree.
        fix_perms: open unreadable directories (see `_open_dir`).

    Raises:
        OSError: what the walk could not get past (entries that vanish under it are
            skipped); `_Moved`; `_Stop` from ``visit``.
    """
    fd = os.open(top, _O_DIR)
    st = os.fstat(fd)
    stack = [_Frame(fd, st.st_dev, st.st_ino, "")]
    try:
        while stack:
            frame = stack[-1]
            assert frame.fd is not None
            if frame.pending is None:
                frame.pending = []
                with os.scandir(frame.fd) as it:
                    for entry in it:
                        try:
                            est = os.lstat(entry.name, dir_fd=frame.fd)
                        except _VANISHED:
                            continue
                        if visit(frame.fd, entry.name, est) and stat.S_ISDIR(est.st_mode):
                            frame.pending.append(entry.name)
            if frame.pending:
                name = frame.pending.pop()
                try:
                    child = _open_dir(name, frame.fd, fix_perms)
                except _VANISHED:
                    continue
                except OSError as e:
                    if e.errno == errno.ELOOP:  # replaced by a symlink meanwhile
                        continue
                    raise
                cst = os.fstat(child)
                if len(stack) > _FD_WINDOW:
                    os.close(frame.fd)
                    frame.fd = None
                stack.append(_Frame(child, cst.st_dev, cst.st_ino, name))
                continue
            stack.pop()
            if not stack:
                os.close(frame.fd)
                break
            parent = stack[-1]
            if parent.fd is None:
                up = os.open("..", _O_DIR, dir_fd=frame.fd)
                ust = os.fstat(up)
                if (ust.st_dev, ust.st_ino) != (parent.dev, parent.ino):
                    os.close(up)
                    raise _Moved(errno.ESTALE, "a directory moved while the walk ran", frame.name)
                parent.fd = up
            os.close(frame.fd)
            frame.fd = None
            if leave is not None:
                leave(parent.fd, frame.name)
    finally:
        for frame in stack:
            if frame.fd is not None:
                os.close(frame.fd)


def _remove_tree(path: str) -> None:
    """``rm -rf path`` that never raises, at any depth or path length.

    Gets through directories a command made unreadable or unwritable. Best effort: what
    cannot be removed (another process still writing there) is left, silently.
    """
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return

    def visit(dir_fd: int, name: str, est: os.stat_result) -> bool:
        if stat.S_ISDIR(est.st_mode):
            return True
        try:
            os.unlink(name, dir_fd=dir_fd)
        except PermissionError:  # the directory lost its write bit (non-root host)
            with contextlib.suppress(OSError):
                os.fchmod(dir_fd, stat.S_IRWXU)
                os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass
        return False

    def leave(parent_fd: int, name: str) -> None:
        try:
            os.rmdir(name, dir_fd=parent_fd)
        except PermissionError:
            with contextlib.suppress(OSError):
                os.fchmod(parent_fd, stat.S_IRWXU)
                os.rmdir(name, dir_fd=parent_fd)
        except OSError:
            pass

    for _ in range(3):  # a walk cut short (a directory moved under it) is simply redone
        try:
            _walk(path, visit, leave)
        except Exception:  # noqa: BLE001 - removal is best effort and must never raise
            pass
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except PermissionError:
            with contextlib.suppress(OSError):
                os.chmod(os.path.dirname(path) or ".", stat.S_IRWXU | stat.S_IXGRP | stat.S_IXOTH)
        except OSError:
            pass


def _disk_usage(path: str, max_bytes: int | None, max_entries: int | None) -> tuple[int, int, bool]:
    """Disk use of the tree at ``path``: ``(bytes, entries, over_limit)``.

    One linear walk by directory fds (`_walk`: any depth, any path length, never
    follows symlinks: a link counts as itself) that stops as soon as ``max_bytes`` or
    ``max_entries`` is passed. Bytes are allocated blocks (``st_blocks * 512``, what
    fills a disk: a sparse file counts what it really uses); a file with several hard
    links counts once. A directory a command made unreadable is opened for the walk and
    its mode put back. It fails closed: a tree that cannot be measured (an error other
    than an entry vanishing under the walk, or directories moved under it three walks
    in a row) counts as over the limit.
    """
    total = 0
    entries = 0
    seen: set[tuple[int, int]] = set()

    def visit(_dir_fd: int, _name: str, st: os.stat_result) -> bool:
        nonlocal total, entries
        entries += 1
        if max_entries is not None and entries > max_entries:
            raise _Stop
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in seen:
                return False
            seen.add(key)
        total += st.st_blocks * 512
        if max_bytes is not None and total > max_bytes:
            raise _Stop
        return stat.S_ISDIR(st.st_mode)

    for _ in range(3):
        total = entries = 0
        seen.clear()
        try:
            _walk(path, visit)
        except _Stop:
            return total, entries, True
        except _Moved:
            continue
        except OSError:
            return total, entries, True
        return total, entries, False
    return total, entries, True


def _chown_tree(path: str, uid: int) -> None:
    """Give ``path`` and everything under it (links themselves, not their targets) to ``uid``."""
    os.lchown(path, uid, uid)

    def visit(dir_fd: int, name: str, st: os.stat_result) -> bool:
        with contextlib.suppress(OSError):
            os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)
        return stat.S_ISDIR(st.st_mode)

    _walk(path, visit)


def _take_uid_slot() -> int:
    with _UID_LOCK:
        for slot in range(_UIDS_PER_PID // 2):
            if slot not in _UID_SLOTS:
                _UID_SLOTS.add(slot)
                return slot
    raise SandboxUnavailable(
        f"gem_core.sandbox.Shell: {_UIDS_PER_PID // 2} Shells are alive in this process, each "
        "holding two uids of its own; close() the ones you no longer need (or run more processes)")


def _release(root_dir: list[str | None], slot: int | None, owner_pid: int, cgroup: list[Any] | None = None,
             trash: Trash | None = None) -> None:
    """Finalizer of a `Shell`: remove its files and memory cgroup and give its uids back.

    Nothing in a forked child (its exit or garbage collection runs this too): the files
    are the parent's.
    """
    if os.getpid() != owner_pid:
        return
    if trash is not None:
        trash.wait()
    if root_dir[0] is not None:
        _remove_tree(root_dir[0])
        root_dir[0] = None
    if cgroup and cgroup[0] is not None:
        cgroup[0].remove()
        cgroup[0] = None
    if slot is not None:
        with _UID_LOCK:
            _UID_SLOTS.discard(slot)


def _seccomp_program() -> bytes | None:
    """The filter of every bubblewrap run (`gem_core.sandbox.seccomp`), or ``None`` with a
    `ReducedIsolationWarning` when this machine has no table or bubblewrap refuses it."""
    global _WARNED_SECCOMP
    program, why = _isolation.seccomp_program()
    if program is None and not _WARNED_SECCOMP:
        _WARNED_SECCOMP = True
        warnings.warn(
            f"gem_core.sandbox.Shell: no seccomp filter ({why}); shell commands may use ptrace "
            "and create user namespaces (other processes of the same uid are then exposed where "
            "the kernel's Yama LSM does not restrict ptrace)", ReducedIsolationWarning, stacklevel=4)
    return program


class Shell(Closing):
    """Runs bash commands, one sandbox per command, in one persistent workspace.

    The workspace is a fresh host temp directory (`reset_workspace`) that every command
    sees as its working directory; files are the only state that carries over. Each
    `run` is a separate ``bash -c`` (``cd``, variables and background jobs do not
    persist: every process a command started is killed when it ends).

    Isolation levels (`isolation` says which is in force):

    * ``"bwrap"`` (needs bubblewrap, ``apt-get install bubblewrap``; 0.8+ for the size
      cap of ``/tmp``): no network, new pid/ipc/uts namespaces, ``--clearenv``;
      read-only ``/usr`` (and the ``/bin``, ``/lib`` links), a minimal ``/etc``, a
      private ``/tmp`` tmpfs (in memory; capped at ``max_workspace_mb`` where bubblewrap
      is 0.8 or newer), and the workspace bound at ``/workspace`` (writable, or
      read-only with ``read_only=True``). The installed ``gem_core`` (its tasks' tests
      and solutions, data samples) and ``$GEM_DATA_DIR`` are hidden behind an empty
      tmpfs where they lie under a bound directory (a non-editable install under
      ``/usr``). A seccomp filter (`gem_core.sandbox.seccomp`) denies ``ptrace``,
      ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``kcmp``, ``userfaultfd``,
      ``open_by_handle_at``, new user namespaces, and every system call through another
      ABI (32-bit, x32), so nothing depends on the host's Yama setting (Yama is not
      required); debuggers do not work inside. When the host runs as root, each command
      drops to a uid of this shell (``setpriv``, no capabilities, ``no_new_privs``), so
      ``max_processes`` binds and the workspace is owned by that uid; a ``grader`` run
      drops to a second uid of this shell (see `run`). Two live Shells never share a
      uid. A non-root host gets no uid of its own per shell: the agent's and the
      grader's commands are then one uid (the seccomp filter still stops tracing, but a
      program a grader runs can read the grader's ``files``).
    * ``"netns"`` / ``"rlimits"``: no bubblewrap (a single `ReducedIsolationWarning`):
      commands run on the host's file system with the workspace's real path as cwd and
      ``$TMPDIR`` in a private directory; ``"netns"`` adds private network and pid
      namespaces. A ``read_only`` run gets a throwaway copy of the workspace instead.
      No seccomp filter and no hidden package: a command can read whatever its uid may
      read on the host (the shipped tasks' tests among it). Not for RL training.

    Every command gets rlimits (file size, address space, processes, open files, CPU
    time) set by a bash prologue it cannot raise, a wall-clock timeout after which its
    whole process tree is killed, and a head+tail cap on its output.

    The workspace as a whole is capped too (there is no quota without root): after each
    writable command, and every 0.25 s while one runs (less often when the workspace is
    big enough to make the walk slow: it takes at most ~10% of a CPU), a walk of the
    workspace (`_disk_usage`: by directory fds, so at any depth and path length; never
    follows symlinks, stops early; fails closed, so what it cannot measure counts as
    over) sums its disk use and counts its entries. Past ``max_workspace_mb`` or ``max_workspace_files`` a running
    command is killed and the result says ``workspace_over_limit``; the caller should
    then remove the workspace. Between two checks a command can still write at disk
    speed, so the cap can overshoot by a quarter second of writing (a few hundred MB on
    a fast disk) before the workspace is removed. Measuring a workspace of a few dozen
    files costs tens of microseconds; 10,000 entries, tens of milliseconds.

    Args:
        isolation: ``"auto"`` (the strongest available) or a level to require
            (`SandboxUnavailable` when it does not work here).
        timeout_s: default wall-clock seconds of `run`.
        memory_mb: address space per process in MiB (RLIMIT_AS), and, where this host lets
            us make a memory cgroup (`memory_scope` ``"command"``), the memory of all the
            processes of a command together (SysV/POSIX shared memory and tmpfs files they
            create included): past it the kernel kills processes of the command.
        max_processes: processes per command (RLIMIT_NPROC; exact under a dropped uid,
            otherwise added to the user's current process count).
        file_size_mb: largest file a command may write (RLIMIT_FSIZE).
        max_open_files: RLIMIT_NOFILE.
        max_output_bytes: output bytes kept per command (half head, half tail).
        max_workspace_mb: disk use (MiB, allocated blocks) the workspace may reach;
            ``None`` turns the byte cap off.
        max_workspace_files: entries (files, directories, links) the workspace may hold
            (default `MAX_WORKSPACE_FILES`, 10,000); ``None`` turns the count cap off.
            With both off the workspace is not measured.

    Not thread-safe: one command at a time (one `Shell` per episode runner). `close`
    removes the workspace (at any depth; it never raises) and gives the shell's uids
    back (at most 256 Shells live at once per process, 249 where pid_max is 2**22); it
    is idempotent and also runs when the object is collected.
    """

    def __init__(
        self,
        *,
        isolation: Literal["auto"] | Isolation = "auto",
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        max_processes: int = 64,
        file_size_mb: int = 16,
        max_open_files: int = 256,
        max_output_bytes: int = 16 * 1024,
        max_workspace_mb: float | None = 256,
        max_workspace_files: int | None = MAX_WORKSPACE_FILES,
    ):
        for name, value in (("timeout_s", timeout_s), ("memory_mb", memory_mb),
                            ("max_processes", max_processes), ("file_size_mb", file_size_mb),
                            ("max_open_files", max_open_files),
                            ("max_output_bytes", max_output_bytes)):
            check_positive_number(f"Shell({name}=...)", value)
        for name, value in (("max_workspace_mb", max_workspace_mb),
                            ("max_workspace_files", max_workspace_files)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not value > 0):
                raise InvalidArgument(
                    f"Shell({name}=...) must be a positive number or None (no cap), got {value!r}")
        if shutil.which("bash") is None:
            raise SandboxUnavailable("gem_core.sandbox.Shell needs bash on PATH; install bash")
        level = _isolation.resolve_isolation(
            isolation, owner="Shell", runs="shell commands run",
            exposure="the workspace is a host directory and read-only runs get a copy of it")
        self.isolation: Isolation = level
        self.timeout_s = float(timeout_s)
        self.max_output_bytes = int(max_output_bytes)
        self.max_workspace_bytes: int | None = (
            None if max_workspace_mb is None else int(max_workspace_mb * 1024 * 1024))
        self.max_workspace_files: int | None = (
            None if max_workspace_files is None else int(max_workspace_files))
        self._limits = {
            "GEM_FSIZE_KB": str(int(file_size_mb) * 1024),
            "GEM_MEM_KB": str(int(memory_mb) * 1024),
            "GEM_NOFILE": str(int(max_open_files)),
        }
        self._max_processes = int(max_processes)
        root = os.geteuid() == 0
        self._setpriv = shutil.which("setpriv") if root else None
        self._uid: int | None = None  # the agent's commands and programs
        self._grader_uid: int | None = None  # the test driver of a grader run
        self._seccomp = _seccomp_program() if level == "bwrap" else None
        self._root: list[str | None] = [None]  # shared with the finalizer
        self._workspace: str | None = None
        self._snapshots: dict[str, str] = {}
        self._closed = False
        self._runs = 0
        slot = None
        if self._setpriv is not None:
            slot = _take_uid_slot()
            self._uid = _UID_BASE + os.getpid() * _UIDS_PER_PID + 2 * slot
            self._grader_uid = self._uid + 1
        # Memory of a whole command: one cgroup per shell, every command started inside it.
        from gem_core.sandbox.pool import capped_memory_cgroup

        self._cgroup: list[Any] = [
            capped_memory_cgroup(f"gem-shell-{os.getpid()}-{next(_SHELL_IDS)}", int(memory_mb) << 20)]
        self.memory_scope: str = "command" if self._cgroup[0] is not None else "process"
        """``"command"``: ``memory_mb`` caps each command's processes together (a memory
        cgroup); ``"process"``: each process alone (RLIMIT_AS; no cgroup here)."""
        # Old workspaces go in the background: one an agent filled with 100,000s of
        # directories would otherwise delay the next episode's reset by seconds.
        self._trash = Trash(_remove_tree)
        self._finalizer = weakref.finalize(self, _release, self._root, slot, os.getpid(), self._cgroup,
                                           self._trash)

    # -- workspace ------------------------------------------------------------------

    @property
    def workspace(self) -> str | None:
        """The workspace's host path (``None`` before the first `reset_workspace`)."""
        return self._workspace

    @property
    def cwd(self) -> str:
        """The workspace as commands see it (``/workspace`` under bubblewrap)."""
        if self.isolation == "bwrap":
            return WORKSPACE
        return self._workspace or ""

    def reset_workspace(self, snapshot: str | None = None) -> str:
        """Remove the current workspace (if any) and create a new one; returns its host path.

        Args:
            snapshot: start from a copy of the snapshot saved under this key
                (`save_snapshot`) instead of an empty directory.

        Raises:
            InvalidArgument: no snapshot has that key.
        """
        self._check_open()
        if snapshot is not None and snapshot not in self._snapshots:
            raise InvalidArgument(
                f"Shell.reset_workspace(snapshot={snapshot!r}): no such snapshot; saved: "
                f"{sorted(self._snapshots) or 'none'} (save one with save_snapshot)")
        root = self._ensure_root()
        if self._workspace is not None:
            self._trash.discard(self._workspace)
        self._trash.discard(os.path.join(root, "tmp"))  # the private $TMPDIR without bubblewrap
        self._runs += 1
        self._workspace = os.path.join(root, f"ws-{self._runs}")
        if snapshot is None:
            os.mkdir(self._workspace, 0o755)
        else:
            self._copy_tree(self._snapshots[snapshot], self._workspace)
        if self._uid is not None:
            _chown_tree(self._workspace, self._uid)
        return self._workspace

    def save_snapshot(self, key: str) -> None:
        """Keep a copy of the workspace as it is now, to start later workspaces from.

        Copying is far cheaper than re-running a setup script in a new sandbox. Only
        snapshot trusted states (e.g. right after a setup script, before any agent
        command): the copy is made by the host process.
        """
        self._check_open()
        if self._workspace is None:
            raise InvalidArgument("Shell.save_snapshot needs a workspace: call reset_workspace() first")
        root = self._ensure_root()
        self._runs += 1
        target = os.path.join(root, f"snap-{self._runs}")
        self._copy_tree(self._workspace, target)
        old = self._snapshots.pop(key, None)
        if old is not None:
            self._trash.discard(old)
        self._snapshots[key] = target

    @property
    def snapshots(self) -> tuple[str, ...]:
        """The keys of the saved snapshots."""
        return tuple(self._snapshots)

    @property
    def _root_dir(self) -> str | None:
        return self._root[0]

    def _ensure_root(self) -> str:
        if self._root[0] is None:
            self._root[0] = tempfile.mkdtemp(prefix="gem-shell-")
            os.chmod(self._root[0], 0o711)  # a dropped uid must traverse it (no bwrap)
        return self._root[0]

    @staticmethod
    def _copy_tree(source: str, target: str) -> None:
        # Symlinks stay links (never followed); modes are kept; only regular files,
        # directories and links are copied (a FIFO or socket is skipped).
        def ignore(directory: str, names: list[str]) -> list[str]:
            skipped = []
            for name in names:
                mode = os.lstat(os.path.join(directory, name)).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                    skipped.append(name)
            return skipped

        shutil.copytree(source, target, symlinks=True, ignore=ignore)

    def remove_workspace(self) -> None:
        """Delete the workspace now (the next `run` needs a `reset_workspace` first)."""
        if self._workspace is not None:
            self._trash.discard(self._workspace)
            self._workspace = None

    def workspace_usage(self) -> tuple[int, int, bool]:
        """Measure the workspace now: ``(bytes, entries, over_limit)`` (see `ShellResult`).

        Raises:
            InvalidArgument: there is no workspace.
        """
        self._check_open()
        if self._workspace is None:
            raise InvalidArgument(
                "Shell.workspace_usage needs a workspace: call reset_workspace() first")
        return _disk_usage(self._workspace, self.max_workspace_bytes, self.max_workspace_files)

    def close(self) -> None:
        """Remove the workspace and every file of this shell. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._workspace = None
        self._snapshots.clear()
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Shell(isolation={self.isolation!r}, {state})"

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed("this Shell is closed; create a new one to run more commands")

    # -- running ----------------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        read_only: bool = False,
        files: Mapping[str, str | bytes] | None = None,
        grader: bool = False,
    ) -> ShellResult:
        """Run ``command`` with ``bash -c`` in the workspace and wait for it.

        Args:
            command: bash source (at most `MAX_COMMAND_BYTES` bytes as UTF-8; NUL bytes
                are not allowed; text that is not valid Unicode is replaced).
            timeout: wall-clock seconds (default ``timeout_s``); when it passes, every
                process of the command is killed and ``timed_out`` is set.
            read_only: mount the workspace read-only (without bubblewrap: run in a
                throwaway copy of it), e.g. to grade it without letting the grader's
                inputs be changed.
            files: ``{name: content}`` written to a fresh read-only directory outside the
                workspace for this run only; its path is in ``$GEM_TASK_DIR``
                (``/task`` under bubblewrap). Names are plain file names.
            grader: run ``command`` as this shell's grader uid instead of the agent's
                (where the shell drops uids: a root host): it may read every file of the
                workspace whatever its mode, ``files`` are readable by it alone (mode
                0400 in a 0500 directory), and the bash function ``as_agent`` runs a
                program as the agent uid without any capability (``as_agent python3
                stats.py``). Use it for a test script that runs the agent's own programs:
                those cannot read the test, signal it or trace it. Without a dropped uid
                (a non-root host) both are the host's uid and ``as_agent`` just runs the
                program.

        Returns:
            The `ShellResult`; the command's failures (exit codes, timeouts, limits) are
            reported in it. A writable run also reports the workspace's size
            (``workspace_bytes``, ``workspace_over_limit``).

        Raises:
            SandboxClosed: the shell was closed.
            InvalidArgument: misuse (no workspace yet, a command that is too long or holds
                NUL, a bad file name, a non-positive timeout).
        """
        self._check_open()
        if self._workspace is None:
            raise InvalidArgument("Shell.run needs a workspace: call reset_workspace() first")
        if not isinstance(command, str):
            raise InvalidArgument(f"Shell.run(command) expects a str of bash source, got {type(command).__name__}")
        data = command.encode("utf-8", "replace")
        if b"\x00" in data:
            raise InvalidArgument("Shell.run(command) got a NUL byte; bash cannot receive one in a command")
        if len(data) > MAX_COMMAND_BYTES:
            raise InvalidArgument(
                f"Shell.run(command) got {len(data)} bytes; at most {MAX_COMMAND_BYTES} are allowed "
                "(write long scripts to a file in steps)")
        timeout = self.timeout_s if timeout is None else float(timeout)
        if not timeout > 0:
            raise InvalidArgument(f"Shell.run(timeout=...) must be positive, got {timeout!r}")
        grader = bool(grader) and self._grader_uid is not None
        extra: list[str] = []
        try:
            owner = self._grader_uid if grader else self._uid
            task_dir = self._write_files(files, extra, owner) if files else None
            workspace = self._workspace
            home = None
            if self.isolation != "bwrap":
                home = self._private_tmp(extra if grader else None, owner)
                if read_only:
                    workspace = os.path.join(self._ensure_root(), f"copy-{time.monotonic_ns()}")
                    extra.append(workspace)
                    try:
                        self._copy_tree(self._workspace, workspace)
                        if self._uid is not None:  # the agent's programs must read what it could
                            _chown_tree(workspace, self._uid)
                    except Exception as e:  # noqa: BLE001 - an agent's tree must not crash the caller
                        return ShellResult(
                            output=f"gem shell: the workspace could not be copied for a read-only "
                                   f"run ({type(e).__name__}: {e})\n", exit_code=126)
            argv, env, cwd = self._command(data, workspace, read_only, task_dir, timeout, grader, home)
            measure = not read_only and (self.max_workspace_bytes is not None
                                         or self.max_workspace_files is not None)
            return self._execute(argv, env, cwd, timeout, self._workspace if measure else None, grader)
        finally:
            for path in extra:
                self._trash.discard(path)

    def _write_files(self, files: Mapping[str, str | bytes], made: list[str], owner: int | None) -> str:
        assert self._root_dir is not None
        directory = os.path.join(self._root_dir, f"files-{time.monotonic_ns()}")
        os.mkdir(directory, 0o700)
        made.append(directory)
        # Readable by the uid that runs the command (its owner) alone where uids are dropped.
        file_mode, dir_mode = (0o400, 0o500) if owner is not None else (0o444, 0o555)
        for name, content in files.items():
            if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
                raise InvalidArgument(f"Shell.run(files=...) names must be plain file names, got {name!r}")
            raw = content.encode() if isinstance(content, str) else bytes(content)
            path = os.path.join(directory, name)
            with open(path, "wb") as f:
                f.write(raw)
            if owner is not None:
                os.chown(path, owner, owner)
            os.chmod(path, file_mode)
        if owner is not None:
            os.chown(directory, owner, owner)
        os.chmod(directory, dir_mode)
        return directory

    def _private_tmp(self, made: list[str] | None, owner: int | None) -> str:
        """``$TMPDIR`` without bubblewrap: the agent's (kept until the next reset), or a
        fresh one per grader run, which the agent's programs it runs may use too."""
        root = self._ensure_root()
        if made is None:
            home = os.path.join(root, "tmp")
            if not os.path.isdir(home):
                os.mkdir(home, 0o700)
                if owner is not None:
                    os.chown(home, owner, owner)
            return home
        home = os.path.join(root, f"tmp-grader-{time.monotonic_ns()}")
        os.mkdir(home)
        made.append(home)
        if owner is not None:
            os.chown(home, owner, owner)
        os.chmod(home, 0o1777)
        return home

    def _env(self, home: str, task_dir: str | None, timeout: float, grader: bool) -> dict[str, str]:
        if self._uid is not None:
            nproc = self._max_processes
        else:
            nproc = _isolation.count_user_processes(os.getuid()) + self._max_processes
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": home,
            "TMPDIR": home,
            "TERM": "dumb",
            "USER": "sandbox",
            "LOGNAME": "sandbox",
            "PYTHONDONTWRITEBYTECODE": "1",
            "GEM_NPROC": str(nproc),
            "GEM_CPU_S": str(int(timeout) + 2),
            **self._limits,
        }
        if task_dir is not None:
            env["GEM_TASK_DIR"] = TASK_DIR if self.isolation == "bwrap" else task_dir
        if grader:
            # An exported bash function (bash imports BASH_FUNC_<name>%% from the environment).
            drop = " ".join(self._dropper(self._uid))
            env["BASH_FUNC_as_agent%%"] = f'() {{ {drop} "$@"; }}'
        return env

    def _dropper(self, uid: int | None, caps: tuple[str, ...] = ()) -> list[str]:
        """``setpriv`` to ``uid`` with no capabilities, or with ``caps`` kept as ambient
        ones (the grader); ``[]`` where uids are not dropped."""
        if self._setpriv is None or uid is None:
            return []
        keep = "".join(f",+{cap}" for cap in caps)
        return [self._setpriv, "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                f"--inh-caps=-all{keep}", f"--ambient-caps=-all{keep}",
                f"--bounding-set=-all{keep}", "--no-new-privs", "--"]

    def _command(
        self, data: bytes, workspace: str, read_only: bool, task_dir: str | None, timeout: float,
        grader: bool, home: str | None,
    ) -> tuple[list[str | bytes], dict[str, str], str]:
        bash: list[str | bytes] = ["/bin/bash", "--noprofile", "--norc", "-c", _LIMITS_SCRIPT,
                                   "gem-shell", data]
        dropper = (self._dropper(self._grader_uid, _GRADER_CAPS) if grader
                   else self._dropper(self._uid))
        if self.isolation == "bwrap":
            env = self._env("/tmp", task_dir, timeout, grader)
            binds = ["--ro-bind" if read_only else "--bind", workspace, WORKSPACE]
            if task_dir is not None:
                binds += ["--ro-bind", task_dir, TASK_DIR]
            caps: tuple[str, ...] = ()
            if self._uid is not None:  # what setpriv needs to drop to the uid, nothing more
                caps = _AGENT_CAPS + (("CAP_DAC_READ_SEARCH",) if grader else ())
            tmp_bytes = (self.max_workspace_bytes if self.max_workspace_bytes is not None
                         and _isolation.bwrap_has_size() else None)
            cmd: list[str | bytes] = list(_isolation.bwrap_command(
                env, python=False, mqueue=False, tmp_bytes=tmp_bytes, binds=binds, caps=caps,
                chdir=WORKSPACE))
            if self._seccomp is not None:
                cmd += ["--seccomp", _SECCOMP_FD]  # the fd number is substituted in _execute
            return cmd + dropper + bash, {"PATH": "/usr/bin:/bin"}, "/"
        assert home is not None
        prefix: list[str | bytes] = []
        if self.isolation == "netns":
            prefix = list(_isolation.unshare_command())
        return prefix + dropper + bash, self._env(home, task_dir, timeout, grader), workspace

    def _kill_uid(self, uid: int | None) -> None:
        """Kill every process of ``uid``, one of this shell's (what escaped the process group).

        Without bubblewrap there may be no pid namespace to end with the command, but a
        dropped uid belongs to this shell alone, so ``kill -KILL -1`` under it finds the
        leftovers (``setsid`` daemons included).
        """
        if uid is None:
            return
        try:
            subprocess.run([*self._dropper(uid), "/bin/kill", "-KILL", "--", "-1"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            pass

    def _execute(
        self, argv: list[str | bytes], env: dict[str, str], cwd: str, timeout: float,
        watch: str | None, grader: bool,
    ) -> ShellResult:
        start = time.monotonic()
        deadline = start + timeout
        next_check = start + _DISK_POLL_S
        over = killed = False  # killed: caught over the workspace limit while running
        capture = OutputCapture(self.max_output_bytes)
        pass_fds: tuple[int, ...] = ()
        if _SECCOMP_FD in argv:
            from gem_core.sandbox.seccomp import filter_fd

            assert self._seccomp is not None
            seccomp_fd = filter_fd(self._seccomp)
            pass_fds = (seccomp_fd,)
            argv = [str(seccomp_fd) if a is _SECCOMP_FD else a for a in argv]
        if self._cgroup[0] is not None:  # join the memory cgroup, then exec the command
            argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self._cgroup[0].procs, *argv]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                    start_new_session=True, close_fds=True, pass_fds=pass_fds)
        finally:
            for pass_fd in pass_fds:
                os.close(pass_fd)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        timed_out = False
        drain_until: float | None = None
        try:
            while True:
                now = time.monotonic()
                if now >= deadline and proc.poll() is None:
                    timed_out = True
                    break
                if drain_until is not None and now >= drain_until:
                    break
                if watch is not None and now >= next_check:
                    if _disk_usage(watch, self.max_workspace_bytes, self.max_workspace_files)[2]:
                        over = True
                        killed = proc.poll() is None
                        break
                    # A slow walk (a big workspace) is repeated less often: at most ~10% of a CPU.
                    cost = time.monotonic() - now
                    next_check = now + cost + max(_DISK_POLL_S, 10 * cost)
                until = deadline if drain_until is None else min(deadline, drain_until)
                wait = max(0.0, min(until - now, 0.05))
                ready, _, _ = select.select([fd], [], [], wait)
                if ready:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:  # every writer is gone: the command has (nearly) exited
                        try:
                            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                        except subprocess.TimeoutExpired:
                            timed_out = True
                        break
                    capture.feed(chunk)
                elif drain_until is None and proc.poll() is not None:
                    # The command is gone but something it left still holds the pipe
                    # (no pid namespace): give it a moment, then stop reading.
                    drain_until = time.monotonic() + _DRAIN_S
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.stdout.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - an unkillable process
                proc.kill()
                proc.wait()
            if self.isolation != "bwrap":
                self._kill_uid(self._uid)
                if grader:
                    self._kill_uid(self._grader_uid)
        code = proc.returncode
        used = files = None
        if watch is not None:  # the final count, after every process of the command is gone
            used, files, over_now = _disk_usage(watch, self.max_workspace_bytes,
                                                self.max_workspace_files)
            over = over or over_now
        return ShellResult(
            output=capture.text(),
            exit_code=-signal.SIGKILL if timed_out or killed else int(code),
            timed_out=timed_out,
            truncated=capture.truncated,
            total_bytes=capture.total,
            duration_s=time.monotonic() - start,
            workspace_bytes=used,
            workspace_files=files,
            workspace_over_limit=over,
        )

