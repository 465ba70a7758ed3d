"""The sandbox zygote: a warm, isolated Python server that forks one child per execution."""

# This file runs INSIDE the sandbox (bubblewrap, an ``unshare`` namespace, or a plain
# process), started by `gem_core.sandbox.pool` as ``python -I -c <this source> <config>``.
# It must stay standard-library only and must not import gem_core (the package is not
# visible inside the sandbox).
#
# Protocol (fds 0 and 1 of this process, moved aside at start): frames of a 4-byte
# big-endian length followed by UTF-8 JSON. The first frame sent is {"ready": true, ...};
# then each request {"code", "prelude", "stdin", "timeout", "cpu_s"} is answered by one
# result frame {"stdout", "stderr", "exit_code", "timed_out", "truncated", "duration_s"},
# and, once the zygote has cleaned up after the run (off the critical path), by an idle
# frame {"idle": true} (or {"idle": false, "why": ...}: the host replaces this worker).
#
# Per execution: a fork; the child starts a new session, drops to a dedicated uid when
# the zygote is root (``drop_uid``), sets rlimits, gets a fresh work dir, a scrubbed
# environment and fresh stdio pipes, then runs the code. The zygote enforces the wall
# clock, reads output with a head+tail byte cap and, afterwards, kills every process the
# execution left behind (the whole pid namespace when it has one).
#
# When the code is done, the child closes its stdout/stderr and writes its exit code on a
# status pipe before it exits: the zygote answers on that, without waiting for the
# kernel to tear the child's address space down (about 1 ms of CPU with numpy loaded);
# it reaps the child afterwards, off the critical path. A child that dies without saying
# (a signal, os._exit) is seen through its pidfd / waitpid as before. Code that writes on
# that pipe itself only ends its own run early with an exit code of its choosing, which
# it could do anyway (``os._exit``).

from __future__ import annotations

import errno
import fcntl
import gc
import json
import os
import resource
import select
import signal
import stat
import struct
import sys
import time
import traceback  # imported here, not per execution: children fork with it loaded

_HEADER = struct.Struct(">I")
_STATUS_FD_MIN = 900  # where the child keeps its status pipe: out of the way of the code's fds
_DRAIN_S = 0.2  # how long stragglers holding a pipe may delay a result (no pid namespace)
# How long the zygote may tidy up after a run. A run that leaves more than this removes
# in time (e.g. 500,000 directories) retires its zygote instead: the host starts a fresh
# one (its private /tmp goes with the old mount namespace), so what one run leaves never
# delays the next run by more than this plus a restart.
CLEANUP_BUDGET_S = 0.25


class _OverBudget(Exception):
    """Cleanup passed its deadline."""


def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd):
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(head)[0])
    return None if body is None else json.loads(body)


def _write_frame(fd, obj):
    data = json.dumps(obj).encode()
    data = _HEADER.pack(len(data)) + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name, dir_fd):
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:  # a directory the run made unreadable (levels without root)
        os.chmod(name, 0o700, dir_fd=dir_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _unlink_all(fd, dev, deadline=None):
    """Unlink every non-directory in the directory open as ``fd``.

    Returns ``(subdirectories on the same file system, whether all else went)``; raises
    `_OverBudget` once ``deadline`` (`time.monotonic`) has passed.
    """
    subdirs, ok = [], True
    for attempt in (0, 1):
        retry = False
        with os.scandir(fd) as entries:
            for count, entry in enumerate(entries):
                if deadline is not None and not count & 255 and time.monotonic() > deadline:
                    raise _OverBudget
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.stat(follow_symlinks=False).st_dev == dev:
                            if not attempt:
                                subdirs.append(entry.name)
                        else:
                            ok = False  # a mount point: never descend into it
                    else:
                        os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
                except PermissionError:
                    retry = True
                except OSError:
                    ok = False
        if not retry or attempt:
            return subdirs, ok and not retry
        try:
            os.chmod(fd, 0o700)  # a directory the run made read-only (levels without root)
        except OSError:
            return subdirs, False
    return subdirs, ok


def remove_tree(parent_fd, name, dev=None, deadline=None):
    """Delete ``name`` (in the directory open as ``parent_fd``) and everything below it.

    Iterative, one directory fd at a time (no recursion, no path-length limit), so a tree
    of any depth goes; it never descends into another file system (a bind mount) and
    stops, rather than delete elsewhere, if the tree moves while it works. Returns whether
    everything went. Never raises ``OSError``; raises `_OverBudget` once ``deadline``
    (`time.monotonic`) has passed, leaving the rest.
    """
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=parent_fd)
            return True
        if dev is None:
            dev = st.st_dev
        if st.st_dev != dev:
            return False
        fd = _open_dir(name, parent_fd)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    ok = True
    # One entry per level: [name in its parent, (dev, inode), subdirectories left or None].
    stack = [[name, (st.st_dev, st.st_ino), None]]
    try:
        while stack:
            top = stack[-1]
            if deadline is not None and time.monotonic() > deadline:
                raise _OverBudget
            if top[2] is None:
                top[2], emptied = _unlink_all(fd, dev, deadline)
                ok = ok and emptied
            if top[2]:
                child = top[2].pop()
                try:
                    child_fd = _open_dir(child, fd)
                except FileNotFoundError:
                    continue
                except OSError:
                    ok = False
                    continue
                cst = os.fstat(child_fd)
                if cst.st_dev != dev:
                    os.close(child_fd)
                    ok = False
                    continue
                os.close(fd)
                fd = child_fd
                stack.append([child, (cst.st_dev, cst.st_ino), None])
                continue
            stack.pop()
            if stack:
                up = os.open("..", _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = up
                ust = os.fstat(fd)
                if (ust.st_dev, ust.st_ino) != stack[-1][1]:
                    return False  # moved under us: stop here
                where = fd
            else:
                where = parent_fd
            try:
                os.rmdir(top[0], dir_fd=where)
            except FileNotFoundError:
                pass
            except OSError:
                ok = False
    except OSError:
        return False
    finally:
        os.close(fd)
    return ok


def remove_path(path, deadline=None):
    """`remove_tree` by path (its parent must exist); ``True`` when nothing is left."""
    parent, name = os.path.split(os.path.abspath(path))
    try:
        fd = os.open(parent, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        return remove_tree(fd, name, deadline=deadline)
    finally:
        os.close(fd)


def _mount_points():
    """Mount points of our mount namespace (``/proc/self/mountinfo``, octal escapes undone)."""
    points = set()
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:
                    points.add(fields[4].decode("unicode_escape").encode("latin-1").decode(errors="replace"))
    except OSError:
        pass
    return points


def _address_space():
    """Bytes of address space this process maps now (``VmSize``), 0 where unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


_READY = b"r"


def _reseed():
    """Fresh 256/128-bit seeds for the random modules (the next forked child inherits
    them). Explicit seeds: ``numpy.random.seed()`` gathers its own entropy 10x slower."""
    try:
        mod = sys.modules.get("random")
        if mod is not None:
            mod.seed(os.urandom(32))
        mod, np = sys.modules.get("numpy.random"), sys.modules.get("numpy")
        if mod is not None and np is not None:
            mod.seed(np.frombuffer(os.urandom(16), dtype=np.uint32))
    except Exception:
        pass


def _prefer_for_oom(pid):
    """Make ``pid`` the OOM killer's first choice: under a memory cgroup it then takes a
    run's processes, not the zygote. ``False`` when not allowed."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")
        return True
    except OSError:
        return False


def _alive(spare):
    """Whether the spare child still runs (a dead one is reaped here)."""
    try:
        if os.waitpid(spare["pid"], os.WNOHANG)[0] == 0:
            return True
    except ChildProcessError:  # reaped already (`Zygote._reap`)
        pass
    spare["reaped"] = True
    return False


def _exit_code(status):
    """An exit code of `ExecResult` from a wait status: the code, or minus the signal."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return -1


class OutputCapture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest.

    The one output capture of gem_core.sandbox: the zygote's (run output) and the host's
    (`Shell` commands) both use this class, so both mark a cut the same way:
    ``... [N bytes truncated] ...`` on a line of its own.
    """

    def __init__(self, limit):
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data):
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            extra = len(self.tail) - self.tail_limit
            if extra > 0:
                del self.tail[:extra]

    @property
    def truncated(self):
        return self.total > len(self.head) + len(self.tail)

    def text(self):
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        cut = self.total - len(self.head) - len(self.tail)
        return f"{head}\n... [{cut} bytes truncated] ...\n{tail}"


class _Sink:
    """A text stream that discards everything (output of replayed prelude cells)."""

    def write(self, s):
        return len(s)

    def flush(self):
        pass


class Zygote:
    def __init__(self, config, proto_in, proto_out):
        self.cfg = config
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.pidns = bool(config["pidns"])
        self.ipcns = bool(config.get("ipcns"))  # a private IPC namespace: all objects are runs'
        self.ns_init = os.getpid() == 1  # we are pid 1 of our namespace (unshare --fork)
        self.drop_uid = config.get("drop_uid")
        self.base_dir = config["base_dir"]
        self.clean_dirs = config.get("clean_dirs", [])
        self.env = dict(config["env"])
        self.limits = config["limits"]
        self.spare = None
        self.base_address_space = 0  # the preloaded zygote's (runs get memory_bytes on top)
        self.unreaped = None  # the last run's child: it reported its status and is exiting
        self.cleanup_phases = {}  # seconds per step of the last `after`
        self.oom_in_child = False  # whether a child must raise its own OOM score
        self.keep = self._keep_sets()

    # ------------------------------------------------------------------ child side

    def _child(self, fds, workdir):
        """A spare child: set itself up, then wait on fd 3 for the one request it runs."""
        try:
            stdin_r, stdout_w, stderr_w, ctrl_r, status_w = fds
            me = os.getpid()
            os.setsid()
            os.dup2(stdin_r, 0)
            os.dup2(stdout_w, 1)
            os.dup2(stderr_w, 2)
            os.dup2(ctrl_r, 3)
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            low = _STATUS_FD_MIN if soft == resource.RLIM_INFINITY or soft > _STATUS_FD_MIN + 1 else 4
            status_fd = fcntl.fcntl(status_w, fcntl.F_DUPFD_CLOEXEC, max(low, status_w + 1))
            os.closerange(4, status_fd)
            os.closerange(status_fd + 1, 1 << 16)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            if self.oom_in_child:  # else the zygote did it (`_prepare`), off this setup's path
                _prefer_for_oom("self")
            if self.drop_uid is not None:
                os.setgroups([])
                os.setgid(self.drop_uid)
                os.setuid(self.drop_uid)
            lim = self.limits
            address_space = lim["memory_bytes"] + self.base_address_space
            settings = [
                (resource.RLIMIT_AS, address_space, address_space),
                (resource.RLIMIT_NPROC, lim["nproc"], lim["nproc"]),
                (resource.RLIMIT_FSIZE, lim["fsize_bytes"], lim["fsize_bytes"]),
                (resource.RLIMIT_NOFILE, lim["nofile"], lim["nofile"]),
                (resource.RLIMIT_CORE, 0, 0),
            ]
            for which, soft, hard in settings:
                resource.setrlimit(which, (soft, hard))
            os.mkdir(workdir, 0o700)
            os.chdir(workdir)
            # The rest of the environment is the zygote's own, set once (`serve`); the
            # zygote also reseeds the random modules after each fork, so no two children
            # share a seed and neither costs this child its setup time.
            os.environ["HOME"] = os.environ["TMPDIR"] = os.environ["PWD"] = workdir
            sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
            sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
            sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False,
                              buffering=1)
            sys.argv = ["<code>"]
            # Walk the paths a request takes once now, while nobody waits: the pages they
            # write (copied on first write after the fork) are this child's before it runs.
            json.loads('{"code": "x = 1", "prelude": [], "cpu_s": 1.0}')
            exec(compile("x = 1", "<warm-up>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            os.write(status_fd, _READY)  # set up: the zygote times a request that came earlier
            req = _read_frame(3)
            if req is None:  # the zygote dropped this spare
                os._exit(0)
            os.close(3)
            cpu = max(1, int(-(-float(req["cpu_s"]) // 1)))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        except BaseException as e:  # the sandbox itself failed to set up: say so on stderr
            os.write(2, f"sandbox setup failed: {type(e).__name__}: {e}\n".encode())
            os._exit(126)
        status = self._exec(req["code"], req.get("prelude") or [])
        if os.getpid() == me:  # not a process the code forked, returning here too
            try:  # EOF and the exit code for the zygote now, before the exit's teardown
                os.close(1)
                os.close(2)
                os.write(status_fd, b"%d\n" % status)
            except BaseException:
                pass
        os._exit(status)

    @staticmethod
    def _exec(code, prelude):
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        real_out, real_err = sys.stdout, sys.stderr
        for index, cell in enumerate(prelude):  # replayed cells: state only, output dropped
            sys.stdout = sys.stderr = _Sink()
            try:
                exec(compile(cell, f"<cell {index}>", "exec"), namespace)
            except BaseException:
                pass
        sys.stdout, sys.stderr = real_out, real_err
        status = 0
        try:
            exec(compile(code, "<code>", "exec"), namespace)
        except SystemExit as e:
            if e.code is None:
                status = 0
            elif isinstance(e.code, int):
                status = e.code & 0xFF
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except BaseException as e:
            tb = e.__traceback__
            # Drop our own frame (the exec call); a SyntaxError has no user frame at all.
            tb = tb.tb_next if tb is not None else None
            try:
                traceback.print_exception(type(e), e, tb)
            except BaseException:
                pass
            status = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        return status

    # ------------------------------------------------------------------ zygote side

    def _kill_leftovers(self, pid):
        """Kill the execution's process group and, where safe, everything it left behind."""
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if self.pidns:
            try:
                os.kill(-1, signal.SIGKILL)  # every process of our namespace but us (and init)
            except OSError:
                pass
        elif self.drop_uid is not None:
            # No pid namespace, but the execution ran under its own uid: a helper with that
            # uid kills every process of it (setsid'd grandchildren included).
            helper = os.fork()
            if helper == 0:
                try:
                    os.setgroups([])
                    os.setgid(self.drop_uid)
                    os.setuid(self.drop_uid)
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(helper, 0)

    def _reap(self, deadline):
        """Reap our zombies; wait (bounded) until the namespace holds no other process."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
                if not self.pidns or self.ns_init:
                    return
            if pid:
                continue
            if not self.pidns or self.ns_init:
                return  # not pid 1 in no namespace: nothing else to wait for
            others = [p for p in os.listdir("/proc") if p.isdigit() and p not in ("1", str(os.getpid()))]
            if not others or time.monotonic() > deadline:
                return
            time.sleep(0.002)

    def _ipc_left(self):
        """SysV IPC objects a run may have left: ``[(kind, id)]``.

        In a private IPC namespace (bubblewrap, ``unshare --ipc``) every object is a run's;
        in the host's namespace only those created by the runs' own uid are ours to remove.
        """
        found = []
        for kind, id_column in (("shm", "shmid"), ("msg", "msqid"), ("sem", "semid")):
            try:  # raw reads: a file object costs more than the usual answer (a header alone)
                fd = os.open(f"/proc/sysvipc/{kind}", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    chunks = []
                    while chunk := os.read(fd, 1 << 16):
                        chunks.append(chunk)
                finally:
                    os.close(fd)
            except OSError:
                continue
            header, _, body = b"".join(chunks).decode("ascii", "replace").partition("\n")
            rows = body.splitlines()
            header = header.split()
            if not rows or id_column not in header or "cuid" not in header:
                continue
            at_id, at_cuid = header.index(id_column), header.index("cuid")
            for row in rows:
                fields = row.split()
                if len(fields) <= max(at_id, at_cuid):
                    continue
                if self.ipcns or (self.drop_uid is not None and fields[at_cuid] == str(self.drop_uid)):
                    found.append((kind, int(fields[at_id])))
        return found

    def _remove_ipc(self):
        """IPC_RMID what runs left, from a helper with the runs' uid (which created it)."""
        found = self._ipc_left()
        if not found:
            return None
        helper = os.fork()
        if helper == 0:
            status = 1
            try:
                if self.drop_uid is not None:
                    os.setgroups([])
                    os.setgid(self.drop_uid)
                    os.setuid(self.drop_uid)
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                ipc_rmid = 0
                status = 0
                for kind, ident in found:
                    if kind == "shm":
                        done = libc.shmctl(ident, ipc_rmid, None)
                    elif kind == "msg":
                        done = libc.msgctl(ident, ipc_rmid, None)
                    else:
                        done = libc.semctl(ident, 0, ipc_rmid)
                    if done != 0 and ctypes.get_errno() not in (errno.EINVAL, errno.EIDRM):
                        status = 1
            finally:
                os._exit(status)
        _, status = os.waitpid(helper, 0)
        if status != 0 or self._ipc_left():
            return "could not remove the SysV IPC objects a run left"
        return None

    def _keep_sets(self):
        """For each dir to wipe: the mount points below it and the directories leading to them.

        Bubblewrap binds e.g. a venv under ``/tmp`` inside our private ``/tmp``; the wipe
        must neither descend into such a mount nor count the directories holding it as
        leftovers.
        """
        keep = {}
        points = _mount_points()
        for directory in self.clean_dirs:
            mounts = {p for p in points if p.startswith(directory.rstrip("/") + "/")}
            parents = set()
            for p in mounts:
                parent = os.path.dirname(p)
                while len(parent) > len(directory):
                    parents.add(parent)
                    parent = os.path.dirname(parent)
            keep[directory] = (mounts, parents)
        return keep

    def _wipe(self, directory, mounts, parents, deadline):
        """Empty ``directory`` except for mounts; ``True`` when nothing else is left."""
        try:
            fd = os.open(directory, _DIR_FLAGS)
        except OSError:
            return not os.path.lexists(directory)
        ok = True
        try:
            dev = os.fstat(fd).st_dev
            for name in os.listdir(fd):
                path = os.path.join(directory, name)
                if path in mounts:
                    continue
                if path in parents:
                    ok = self._wipe(path, mounts, parents, deadline) and ok
                else:
                    ok = remove_tree(fd, name, dev, deadline) and ok
        except OSError:
            ok = False
        finally:
            os.close(fd)
        return ok

    def _cleanup_files(self, workdir):
        """Remove the run's work dir and wipe the private dirs; ``None`` or what is left.

        Bounded by `CLEANUP_BUDGET_S`: past it, the zygote reports itself unclean and the
        host replaces it.
        """
        left = []
        deadline = time.monotonic() + CLEANUP_BUDGET_S
        try:
            if not remove_path(workdir, deadline):
                left.append(workdir)
            for directory in self.clean_dirs:
                mounts, parents = self.keep.get(directory, ((), ()))
                if not self._wipe(directory, mounts, parents, deadline):
                    left.append(directory)
        except _OverBudget:
            return f"the run left more than {CLEANUP_BUDGET_S} s of cleanup"
        return f"could not remove everything in {', '.join(left)}" if left else None

    def _prepare(self):
        """Fork the spare child that will run the next request (off the critical path)."""
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        ctrl_r, ctrl_w = os.pipe2(os.O_CLOEXEC)
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        for fd in (out_r, err_r):
            try:
                fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: fewer wake-ups for big outputs
            except OSError:
                pass
        workdir = os.path.join(self.base_dir, f"run-{os.getpid()}-{time.monotonic_ns()}")
        pid = os.fork()
        if pid == 0:
            self._child((in_r, out_w, err_w, ctrl_r, status_w), workdir)
        for fd in (in_r, out_w, err_w, ctrl_r, status_w):
            os.close(fd)
        if not self.oom_in_child and not _prefer_for_oom(str(pid)):
            self.oom_in_child = True  # not allowed here: this child went without, so replace it
            self.spare = {"pid": pid, "in_w": in_w, "out_r": out_r, "err_r": err_r, "ctrl_w": ctrl_w,
                          "status_r": status_r, "pidfd": None, "workdir": workdir}
            self._drop_spare()
            return self._prepare()
        _reseed()  # for the next spare: forked children must not share a seed
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        self.spare = {"pid": pid, "in_w": in_w, "out_r": out_r, "err_r": err_r, "ctrl_w": ctrl_w,
                      "status_r": status_r, "pidfd": pidfd, "workdir": workdir, "ready": False}

    def _await_spare(self, spare, deadline):
        """Wait (bounded by ``deadline``) until the spare has set itself up.

        Only for the figures (`phases`): a request sent earlier would wait in its pipe just
        the same. A spare that dies instead shows as EOF; its exit status reports it.
        """
        if spare["ready"]:
            return
        fd = spare["status_r"]
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            try:
                os.read(fd, len(_READY))
            except OSError:
                pass
            spare["ready"] = True

    def _drop_spare(self):
        spare, self.spare = self.spare, None
        if spare is None:
            return
        try:  # through its pidfd where there is one: a pid reaped already may be reused
            if spare["pidfd"] is not None:
                signal.pidfd_send_signal(spare["pidfd"], signal.SIGKILL)
            elif not spare.get("reaped"):
                os.kill(spare["pid"], signal.SIGKILL)
        except OSError:
            pass
        if not spare.get("reaped"):
            try:
                os.waitpid(spare["pid"], 0)
            except ChildProcessError:
                pass
        for key in ("in_w", "out_r", "err_r", "ctrl_w", "status_r", "pidfd"):
            if spare[key] is not None:
                os.close(spare[key])
        remove_path(spare["workdir"])

    def run(self, req):
        """Run one request in the spare child; return (reply, cleanup state)."""
        start = time.monotonic()
        timeout = float(req["timeout"])
        deadline = start + timeout
        if self.spare is not None and not _alive(self.spare):
            self._drop_spare()  # it died while waiting (killed from outside); make another
        if self.spare is None:
            self._prepare()
        spare, self.spare = self.spare, None
        pid, in_w, pidfd, workdir = spare["pid"], spare["in_w"], spare["pidfd"], spare["workdir"]
        out_r, err_r, status_r = spare["out_r"], spare["err_r"], spare["status_r"]
        limit = int(self.limits["max_output_bytes"])
        out, err = OutputCapture(limit), OutputCapture(limit)
        got = time.monotonic()
        self._await_spare(spare, deadline)
        sent = time.monotonic()
        try:
            _write_frame(spare["ctrl_w"], {"code": req["code"], "prelude": req.get("prelude") or [],
                                           "cpu_s": float(req.get("cpu_s") or self.limits["cpu_s"])})
        except OSError:
            pass  # the child is gone; its exit status tells
        os.close(spare["ctrl_w"])
        os.set_blocking(in_w, False)
        poller = select.poll()
        readers = {out_r: out, err_r: err}
        for fd in readers:
            poller.register(fd, select.POLLIN)
        pending = memoryview((req.get("stdin") or "").encode())
        if pending:
            poller.register(in_w, select.POLLOUT)
        else:
            os.close(in_w)
            in_w = -1
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        poller.register(status_r, select.POLLIN)
        exit_code = None  # known once the child reported it (status pipe) or was reaped
        status_at = None
        reaped = False
        timed_out = False
        drain_until = None
        while readers or exit_code is None:
            now = time.monotonic()
            if exit_code is None and now >= deadline:
                timed_out = True
                break
            if drain_until is not None and now >= drain_until:
                break
            until = deadline if drain_until is None else min(drain_until, deadline)
            wait_ms = max(0, int((until - now) * 1000) + 1)
            if pidfd is None and exit_code is None:
                wait_ms = min(wait_ms, 10)
            events = poller.poll(wait_ms)
            for fd, _ in events:
                if fd == pidfd:
                    poller.unregister(pidfd)
                    os.close(pidfd)
                    pidfd = None
                elif fd == status_r:
                    try:
                        said = os.read(status_r, 64)
                    except OSError:
                        said = b""
                    poller.unregister(status_r)
                    os.close(status_r)
                    status_r = -1
                    said = said.removeprefix(_READY)  # the spare's "set up" byte, if unread
                    code = said[:-1] if said.endswith(b"\n") else b""
                    if exit_code is None and code.isdigit() and len(code) <= 3 and int(code) <= 255:
                        exit_code = int(code)  # the child is exiting: leftovers go now
                        status_at = time.monotonic()
                        self._kill_leftovers(pid)
                        drain_until = time.monotonic() + _DRAIN_S
                elif fd == in_w:
                    try:
                        pending = pending[os.write(in_w, pending):]
                    except BlockingIOError:
                        continue
                    except OSError:  # the child closed its stdin
                        pending = pending[:0]
                    if not pending:
                        poller.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                else:
                    chunk = os.read(fd, 1 << 20)
                    if chunk:
                        readers[fd].feed(chunk)
                    else:
                        poller.unregister(fd)
                        os.close(fd)
                        del readers[fd]
            if exit_code is None:
                done, raw = os.waitpid(pid, os.WNOHANG)
                if done:
                    exit_code, reaped = _exit_code(raw), True
                    status_at = time.monotonic()
                    # The child is gone: whatever still holds its pipes is a leftover.
                    self._kill_leftovers(pid)
                    drain_until = time.monotonic() + _DRAIN_S
        self._kill_leftovers(pid)
        if exit_code is None:  # timed out: killed just now
            exit_code, reaped = _exit_code(os.waitpid(pid, 0)[1]), True
        if not reaped:
            self.unreaped = pid  # killed, exiting: reaped after the reply
        for fd in list(readers) + [in_w, status_r] + ([pidfd] if pidfd is not None else []):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        end = time.monotonic()
        reply = {
            "stdout": out.text(),
            "stderr": err.text(),
            "exit_code": exit_code,
            "timed_out": timed_out,
            "truncated": out.truncated or err.truncated,
            "duration_s": end - start,
            # Where the run's time went, in the zygote (`Sandbox.phase_times` adds the host's).
            "phases": {"spare_wait": sent - got, "child": (status_at or end) - sent,
                       "finish": end - (status_at or end)},
        }
        return reply, workdir

    def after(self, workdir):
        """Between requests: reap, wipe files, fork the next spare.

        Returns ``None`` when the worker is clean and ready, else why it is not (the host
        then replaces it). Never raises: nothing a run leaves behind may kill the worker.
        """
        clock = time.monotonic
        times = self.cleanup_phases = {}
        try:
            # The next run's child is forked last: forked earlier, the cleanup's writes
            # would copy the zygote's pages it shares with that child (measured: slower).
            t1 = clock()
            pid, self.unreaped = self.unreaped, None
            if pid is not None:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            self._reap(time.monotonic() + 1.0)
            t2 = clock()
            dirty = self._cleanup_files(workdir)
            t3 = clock()
            dirty = dirty or self._remove_ipc()
            t4 = clock()
            if dirty is None:
                self._prepare()
            times.update(reap=t2 - t1, files=t3 - t2, ipc=t4 - t3, fork=clock() - t4)
            return dirty
        except BaseException as e:  # RecursionError, MemoryError, ...: retire, never die here
            return f"cleanup failed: {type(e).__name__}: {e}"

    def serve(self):
        # Every run's environment (a child sets only its HOME, TMPDIR and PWD).
        os.environ.clear()
        os.environ.update(self.env)
        self._prepare()
        _write_frame(self.proto_out, {"ready": True, "pid": os.getpid(), "preloaded": self.preloaded})
        while True:
            req = _read_frame(self.proto_in)
            if req is None:
                self._drop_spare()
                return
            workdir = None
            try:
                reply, workdir = self.run(req)
            except Exception as e:  # a zygote bug: report it rather than dying silently
                reply = {"error": f"{type(e).__name__}: {e}"}
            _write_frame(self.proto_out, reply)  # answer first, tidy up while the host works
            if workdir is None:
                continue  # the host replaces a worker that reported an error
            why = self.after(workdir)
            # The host starts the next run's deadline only once it has read this frame.
            _write_frame(self.proto_out, {"idle": True, "phases": self.cleanup_phases} if why is None
                         else {"idle": False, "why": why})

    def preload(self):
        import importlib

        self.preloaded = []
        for name in self.cfg.get("preload", []):
            try:
                importlib.import_module(name)
                self.preloaded.append(name)
            except Exception:
                pass
        self.base_address_space = _address_space()


def main():
    config = json.loads(sys.argv[1])
    # Move the protocol pipes off fds 0/1 so stray prints cannot corrupt the protocol.
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:  # executions (same uid without bubblewrap's uid drop) must not ptrace or read our memory
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass
    zygote = Zygote(config, proto_in, proto_out)
    zygote.preload()
    # Out of the cyclic collector's reach from now on: a collection in a forked child
    # would otherwise walk (and so copy) every page of the preloaded heap.
    gc.collect()
    gc.freeze()
    try:
        zygote.serve()
    except OSError as e:
        if e.errno not in (errno.EPIPE, errno.EBADF):
            raise


if __name__ == "__main__":
    main()
