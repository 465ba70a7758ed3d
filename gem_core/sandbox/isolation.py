"""The isolation layer of the Python pool (`Sandbox`) and the `Shell`: which level works here
(bubblewrap, network namespace, rlimits), the command line of each level, what a sandbox
masks, its seccomp filter, and the one reduced-isolation warning.

Both users call `resolve_isolation` to turn ``isolation="auto"`` (or a required level) into
the level in force, and build their command lines from `bwrap_command` and
`unshare_command`; tests patch `detect_isolation` here, the one place that decides.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from gem_core.errors import InvalidArgument, ReducedIsolationWarning, SandboxUnavailable

__all__ = [
    "Isolation",
    "LEVELS",
    "ReducedIsolationWarning",
    "SYSTEM_DIRS",
    "ETC_FILES",
    "DATA_DIR_VARS",
    "detect_isolation",
    "probe",
    "resolve_isolation",
    "bwrap_command",
    "bwrap_has_size",
    "unshare_command",
    "python_dirs",
    "package_dirs",
    "masked_dirs",
    "other_installs",
    "seccomp_program",
    "others_can_read",
    "count_user_processes",
]

Isolation = Literal["bwrap", "netns", "rlimits"]
LEVELS: tuple[Isolation, ...] = ("bwrap", "netns", "rlimits")
"""The isolation levels, strongest first."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Bound read-only under bubblewrap (a symlink, e.g. ``/bin -> usr/bin``, stays a link)."""

ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/alternatives")
"""All of ``/etc`` a sandbox sees (no ``passwd``, no ``hosts``)."""

DATA_DIR_VARS = ("GEM_DATA_DIR", "HF_HOME", "HF_DATASETS_CACHE", "HF_HUB_CACHE")
"""Environment variables naming dataset directories a sandbox must not read."""

_UNSHARE_FLAGS = ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                  "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                  "--hostname", "sandbox", "--clearenv")
_PROBE_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
              "USER": "sandbox", "LOGNAME": "sandbox", "PATH": "/usr/bin:/bin"}

_PROBED: dict[str, str | None] = {}  # level (or "seccomp") -> None (works) or why not
_SECCOMP: dict[str, bytes | None] = {}
_PROBE_LOCK = threading.Lock()
_WARNED: set[str] = set()  # the subjects (Sandbox, Shell) already warned about reduced isolation


def _renew_lock_after_fork() -> None:
    """In a forked child a lock another thread held at the fork would stay locked for good."""
    global _PROBE_LOCK
    _PROBE_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_renew_lock_after_fork)


# ----------------------------------------------------------------------------- host facts


def python_dirs() -> list[str]:
    """Directories the interpreter needs (prefixes of the venv and its base Python) that
    lie outside `SYSTEM_DIRS`, outermost only."""
    found: list[str] = []
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(sys.executable)}
    candidates |= {os.path.realpath(p) for p in list(candidates)}
    candidates.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    for path in sorted(candidates):
        if not path or path == "/" or not os.path.isdir(path):
            continue
        if any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS):
            continue
        if any(path.startswith(kept + "/") for kept in found):
            continue
        found = [kept for kept in found if not kept.startswith(path + "/")] + [path]
    return found


def package_dirs() -> list[str]:
    """The installed ``gem_core`` package and its metadata (``*.dist-info``) directories."""
    package = os.path.realpath(Path(__file__).resolve().parents[1])
    parent = os.path.dirname(package)
    found = [package]
    for pattern in ("gem_core-*.dist-info", "gem_core-*.egg-info", "gem_core.egg-info",
                    "gem-core-*.dist-info"):
        found += sorted(glob.glob(os.path.join(glob.escape(parent), pattern)))
    return found


_SITE_DIRS = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
              "lib64/python3*/site-packages", "local/lib/python3*/site-packages",
              "local/lib/python3*/dist-packages", "local/lib/python3/dist-packages")
_PACKAGE_PATTERNS = ("gem_core", "gem_core-*.dist-info", "gem_core-*.egg-info", "gem_core.egg-info",
                     "gem-core-*.dist-info")


def other_installs(bound: Sequence[str]) -> list[str]:
    """Every ``gem_core`` package (and its metadata) in a Python library directory of the
    bound dirs: another copy (the system Python's, ``/usr/local``'s) holds the same task
    tests and samples as the one running."""
    found: list[str] = []
    for root in bound:
        for site in _SITE_DIRS:
            for lib in glob.glob(os.path.join(glob.escape(root), site)):
                for pattern in _PACKAGE_PATTERNS:
                    found += glob.glob(os.path.join(glob.escape(lib), pattern))
    return sorted(p for p in found if os.path.isdir(p))


def _bound_system_dirs() -> list[str]:
    return [os.path.realpath(d) for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]


def masked_dirs(bound: Sequence[str]) -> list[str]:
    """Directories inside the bound ones that sandboxed code must not read.

    The installed ``gem_core`` package and its metadata (data samples hold the answers of
    the shipped tasks; a terminal task's ``solution.sh`` its solution), every other copy
    in a Python library directory of the bound dirs (`other_installs`), the source
    checkout when an editable install's checkout lies inside a bound dir, and dataset
    directories (`DATA_DIR_VARS`) that lie inside one. Outermost only: a directory inside
    another masked one is already hidden (and bubblewrap could not mount on it).

    Args:
        bound: the host directories bound into the sandbox (real paths).
    """
    packages = package_dirs()
    candidates = list(packages) + other_installs(bound)
    checkout = os.path.dirname(packages[0])
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        candidates.append(checkout)  # an editable install's checkout
    for var in DATA_DIR_VARS:
        value = os.environ.get(var)
        if value:
            candidates.append(os.path.expanduser(value))
    masked: list[str] = []
    for path in sorted({os.path.realpath(p) for p in candidates}):
        inside = any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound)
        if inside and os.path.isdir(path) and not any(path.startswith(m + "/") for m in masked):
            masked.append(path)
    return masked


def others_can_read(path: str) -> bool:
    """Whether a uid that owns nothing may list ``path`` and traverse all its parents."""
    try:
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
        parent = os.path.dirname(path)
        while parent not in ("/", ""):
            if not os.stat(parent).st_mode & 0o001:
                return False
            parent = os.path.dirname(parent)
    except OSError:
        return False
    return True


def count_user_processes(uid: int) -> int:
    """How many processes ``uid`` runs now (what RLIMIT_NPROC counts for it)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry.path).st_uid == uid:
                count += 1
        except OSError:
            pass
    return count


def bwrap_has_size() -> bool:
    """Whether this bubblewrap takes ``--size`` (a cap on a ``--tmpfs``; bubblewrap 0.8+)."""
    with _PROBE_LOCK:
        if "size" not in _PROBED:
            try:
                proc = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"],
                                      capture_output=True, text=True, timeout=10, check=False)
                _PROBED["size"] = None if "--size" in proc.stdout + proc.stderr else "no --size"
            except (OSError, subprocess.SubprocessError) as e:
                _PROBED["size"] = f"{type(e).__name__}: {e}"
        return _PROBED["size"] is None


# ----------------------------------------------------------------------------- command lines


def bwrap_command(
    env: Mapping[str, str],
    *,
    python: bool = True,
    mqueue: bool = True,
    tmp_bytes: int | None = None,
    binds: Sequence[str] = (),
    caps: Sequence[str] = (),
    chdir: str = "/tmp",
) -> list[str]:
    """The bubblewrap argv (without the program) that both sandboxes start from.

    No network; new pid, ipc, uts (and cgroup) namespaces; ``--clearenv`` then ``env``;
    read-only `SYSTEM_DIRS`, a minimal ``/etc`` (`ETC_FILES`), ``/dev``, ``/proc`` and a
    private ``/tmp`` tmpfs; `masked_dirs` of everything bound hidden behind an empty,
    read-only tmpfs. As root every capability is dropped but ``caps``.

    Args:
        env: the whole environment inside.
        python: bind the Python installation (`python_dirs`) read-only, with the parents
            bubblewrap creates made traversable.
        mqueue: a private ``/dev/mqueue``.
        tmp_bytes: size cap of ``/tmp`` (bubblewrap 0.8+), or ``None``.
        binds: further bubblewrap arguments placed after the standard mounts (the
            shell's workspace and task dir).
        caps: capabilities kept when the host runs as root (``CAP_*`` names).
        chdir: the working directory inside.

    Raises:
        SandboxUnavailable: bubblewrap is not on ``PATH``.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not on PATH")
    cmd = [bwrap, *_UNSHARE_FLAGS]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    cmd += ["--perms", "0755", "--dir", "/etc"]
    for path in ETC_FILES:
        cmd += ["--ro-bind-try", path, path]
    cmd += ["--dev", "/dev"]
    if mqueue:
        cmd += ["--mqueue", "/dev/mqueue"]
    cmd += ["--proc", "/proc", "--perms", "1777"]
    if tmp_bytes is not None:
        cmd += ["--size", str(tmp_bytes)]
    cmd += ["--tmpfs", "/tmp"]
    bound = _bound_system_dirs()
    if python:
        made: set[str] = set()
        for path in python_dirs():
            # Parents bubblewrap creates would copy the host's modes (``/root`` is 0700, which
            # would lock a dropped uid out of a pyenv Python): make them traversable first.
            parent = os.path.dirname(path)
            ancestors = []
            while parent not in ("/", "") and parent not in made and parent != "/tmp":
                ancestors.append(parent)
                parent = os.path.dirname(parent)
            for directory in reversed(ancestors):
                cmd += ["--perms", "0755", "--dir", directory]
                made.add(directory)
            cmd += ["--ro-bind", path, path]
            bound.append(path)
    cmd += list(binds)
    for path in masked_dirs(bound):  # an empty, read-only directory in its place
        cmd += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
    if os.geteuid() == 0:
        cmd += ["--cap-drop", "ALL"]
        for cap in caps:
            cmd += ["--cap-add", cap]
    cmd += ["--chdir", chdir]
    return cmd


def unshare_command() -> list[str]:
    """The ``unshare`` argv of the ``"netns"`` level: private network, pid and IPC namespaces
    (as a mapped root user where the host is not root).

    Raises:
        SandboxUnavailable: ``unshare`` is not on ``PATH``.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SandboxUnavailable("unshare (util-linux) is not on PATH")
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    return [unshare, *user, "--net", "--pid", "--ipc", "--fork", "--kill-child"]


def _prefix(level: Isolation, env: Mapping[str, str]) -> list[str]:
    if level == "bwrap":
        return bwrap_command(env)
    if level == "netns":
        return unshare_command()
    return []


# ----------------------------------------------------------------------------- choosing


def probe(level: Isolation) -> str | None:
    """``None`` when a Python can start under ``level`` here, else the reason why not
    (cached per process)."""
    if level == "rlimits":
        return None
    with _PROBE_LOCK:
        if level in _PROBED:
            return _PROBED[level]
        try:
            cmd = _prefix(level, _PROBE_ENV) + [sys.executable, "-I", "-c", "import os; print('ok')"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=dict(_PROBE_ENV))
            why = None if proc.stdout.strip() == "ok" else (
                f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}")
        except SandboxUnavailable as e:
            why = str(e)
        except (OSError, subprocess.SubprocessError) as e:
            why = f"{type(e).__name__}: {e}"
        _PROBED[level] = why
        return why


def detect_isolation() -> tuple[Isolation, dict[str, str]]:
    """The strongest isolation that works here, and why each stronger one does not.

    Returns:
        ``(isolation, reasons)``: ``"bwrap"`` when bubblewrap starts a sandbox, else
        ``"netns"`` when ``unshare`` may create network and pid namespaces, else
        ``"rlimits"``; ``reasons`` maps each skipped level to the failure.
    """
    reasons: dict[str, str] = {}
    for level in ("bwrap", "netns"):
        why = probe(level)  # type: ignore[arg-type]
        if why is None:
            return level, reasons  # type: ignore[return-value]
        reasons[level] = why
    return "rlimits", reasons


def resolve_isolation(requested: str, *, owner: str, runs: str, exposure: str) -> Isolation:
    """The level a sandbox gets for its ``isolation=`` argument.

    ``"auto"`` takes the strongest level that works (`detect_isolation`) and, below
    bubblewrap, warns once per ``owner`` with a `ReducedIsolationWarning`; a named level
    must work here.

    Args:
        requested: ``"auto"`` or one of `LEVELS`.
        owner: the class asking, as its errors and the warning name it (``"Sandbox"``).
        runs: what runs with reduced isolation, e.g. ``"sandboxed code runs"``.
        exposure: what that means for it, e.g. ``"it can read the host's files ..."``.

    Raises:
        SandboxUnavailable: the named level does not work here.
        InvalidArgument: ``requested`` is not a level.
    """
    if requested == "auto":
        level, reasons = detect_isolation()
        if level != "bwrap":
            _warn_reduced(owner, runs, exposure, level, reasons)
        return level
    if requested in LEVELS:
        why = probe(requested)  # type: ignore[arg-type]
        if why is not None:
            raise SandboxUnavailable(
                f"{owner}(isolation={requested!r}) does not work here: {why}. Use "
                "isolation='auto' to fall back to the strongest level that does.")
        return requested  # type: ignore[return-value]
    raise InvalidArgument(
        f"{owner}(isolation=...) expects 'auto', 'bwrap', 'netns' or 'rlimits', got {requested!r}")


def _warn_reduced(owner: str, runs: str, exposure: str, level: Isolation, reasons: dict[str, str]) -> None:
    if owner in _WARNED:
        return
    _WARNED.add(owner)
    detail = "; ".join(f"{k}: {v}" for k, v in reasons.items())
    namespaces = ("private network and pid namespaces, but the host's file system" if level == "netns"
                  else "no network or pid namespace and the host's file system")
    warnings.warn(
        f"gem_core.sandbox.{owner}: bubblewrap is unavailable ({detail}), so {runs} with reduced "
        f"isolation ({level}: rlimits, {namespaces}; {exposure}). Install bubblewrap for full "
        "isolation (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap).",
        ReducedIsolationWarning,
        stacklevel=4,  # the caller of Sandbox(...) / Shell(...)
    )


def seccomp_program() -> tuple[bytes | None, str | None]:
    """The seccomp filter of every bubblewrap sandbox (`gem_core.sandbox.seccomp`: ptrace,
    ``process_vm_*`` & co. and user namespaces fail), checked once per process to be
    accepted by bubblewrap here.

    Returns:
        ``(program, None)``, or ``(None, why)`` where this machine has no system call table
        or bubblewrap refuses the filter.
    """
    with _PROBE_LOCK:
        if "program" not in _SECCOMP:
            from gem_core.sandbox import seccomp

            program: bytes | None = None
            try:
                program = seccomp.build_filter()
                fd = seccomp.filter_fd(program)
                try:
                    proc = subprocess.run(
                        [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
                         "--seccomp", str(fd), "--", "/bin/true"],
                        pass_fds=(fd,), capture_output=True, text=True, timeout=30, check=False)
                finally:
                    os.close(fd)
                why = None if proc.returncode == 0 else (
                    f"bwrap --seccomp failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
            except SandboxUnavailable as e:
                why = str(e)
            except (OSError, subprocess.SubprocessError, ValueError) as e:
                why = f"bwrap --seccomp failed: {type(e).__name__}: {e}"
            _SECCOMP["program"] = program if why is None else None
            _PROBED["seccomp"] = why
        return _SECCOMP["program"], _PROBED["seccomp"]
