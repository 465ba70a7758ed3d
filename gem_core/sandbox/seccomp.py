"""Seccomp filters for the sandboxes: a deny list compiled to classic BPF in pure Python.

`build_filter` returns the raw ``struct sock_filter`` array that bubblewrap's
``--seccomp FD`` (and ``--add-seccomp-fd FD``) reads; `filter_fd` puts it in a pipe for
that. No libseccomp is needed. The program checks the architecture field of
``seccomp_data`` first: a system call made through any other ABI than the native one
(32-bit ``int 0x80`` on x86-64, x32 numbers) kills the process, so a denied call cannot
be reached by its number in another table.

Example::

    program = build_filter()                 # DEFAULT_DENY, EPERM, no user namespaces
    fd = filter_fd(program)
    try:
        subprocess.Popen(["bwrap", "--seccomp", str(fd), ...], pass_fds=(fd,))
    finally:
        os.close(fd)
"""

from __future__ import annotations

import errno as _errno
import os
import struct
from collections.abc import Iterable

from gem_core.errors import InvalidArgument, SandboxUnavailable

__all__ = [
    "DEFAULT_DENY",
    "SUPPORTED_ARCHES",
    "build_filter",
    "filter_fd",
    "native_arch",
]

DEFAULT_DENY: tuple[str, ...] = (
    "ptrace",  # attach to another process of the same uid (the test driver) and steer it
    "process_vm_readv",  # read another process's memory (the expected values of a test)
    "process_vm_writev",  # ... or write it
    "pidfd_getfd",  # take a copy of another process's file descriptor
    "kcmp",  # compare other processes' fds and memory: a probe of their state
    "userfaultfd",  # the usual tool to win kernel races in exploits; no task needs it
    "open_by_handle_at",  # reads files by handle, bypassing mounts (with CAP_DAC_READ_SEARCH)
    # Kernel keyrings: per-uid state that outlives a run (a key one run adds, the next reads)
    "add_key",
    "request_key",
    "keyctl",
    # POSIX message queues: named kernel objects that outlive the process that made them
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    # Large kernel surfaces no task needs (io_uring, perf events, eBPF)
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "perf_event_open",
    "bpf",
)
"""What `build_filter` denies by default: calls that reach into other processes; the
per-uid kernel state a run could leave for the next (keyrings, POSIX message queues;
SysV IPC lives in the run's own IPC namespace); and kernel-exploit surfaces (userfaultfd,
io_uring, perf events, eBPF). Every program a task needs (coreutils, python3, tar, ...)
runs without them; debuggers (``strace``, ``gdb``) do not."""

# Per architecture: the AUDIT_ARCH_* value in seccomp_data.arch, the numbers of the calls
# we know, and the lowest number that selects another ABI on the same arch (x32 on x86-64).
_ARCHES: dict[str, tuple[int, dict[str, int], int | None]] = {
    "x86_64": (0xC000003E, {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
        "kcmp": 312, "userfaultfd": 323, "open_by_handle_at": 304, "unshare": 272,
        "clone": 56, "clone3": 435,
        "add_key": 248, "request_key": 249, "keyctl": 250,
        "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
        "mq_notify": 244, "mq_getsetattr": 245,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "perf_event_open": 298, "bpf": 321,
    }, 0x40000000),
    "aarch64": (0xC00000B7, {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
        "kcmp": 272, "userfaultfd": 282, "open_by_handle_at": 265, "unshare": 97,
        "clone": 220, "clone3": 435,
        "add_key": 217, "request_key": 218, "keyctl": 219,
        "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183,
        "mq_notify": 184, "mq_getsetattr": 185,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "perf_event_open": 241, "bpf": 280,
    }, None),
}
SUPPORTED_ARCHES: tuple[str, ...] = tuple(_ARCHES)
"""The machines `build_filter` knows (``uname -m`` names)."""

_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
_CLONE_NEWUSER = 0x10000000

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
# Offsets in struct seccomp_data: int nr; __u32 arch; __u64 ip; __u64 args[6].
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LOW = 16 if struct.pack("=I", 1) == struct.pack("<I", 1) else 20


def native_arch() -> str:
    """This machine's architecture as `build_filter` names it (``uname -m``)."""
    machine = os.uname().machine.lower()
    return _MACHINE_ALIASES.get(machine, machine)


def build_filter(
    deny: Iterable[str] = DEFAULT_DENY,
    *,
    errno: int = _errno.EPERM,
    deny_user_namespaces: bool = True,
    arch: str | None = None,
) -> bytes:
    """Compile a deny-list seccomp filter to the bytes bubblewrap's ``--seccomp`` reads.

    Every system call not named is allowed. The program:

    1. kills the process when ``seccomp_data.arch`` is not ``arch``'s (another ABI);
    2. on x86-64, fails every x32 call (numbers from ``0x40000000``) with ``errno``;
    3. fails each call in ``deny`` with ``errno``;
    4. with ``deny_user_namespaces``, fails ``unshare`` and ``clone`` whose flags hold
       ``CLONE_NEWUSER`` with ``errno``, and ``clone3`` (its flags are behind a pointer
       a filter cannot read) with ``ENOSYS``, which makes the C library fall back to
       ``clone``.

    Args:
        deny: system call names (see `DEFAULT_DENY`); each must be one this module
            knows for ``arch``.
        errno: the error a denied call returns (``EPERM`` by default).
        deny_user_namespaces: also refuse new user namespaces (the kernel surface they
            open to an unprivileged process is large; nothing in a sandbox needs one).
        arch: ``"x86_64"`` or ``"aarch64"``; default: this machine's.

    Returns:
        The filter as an array of ``struct sock_filter`` in native byte order.

    Raises:
        SandboxUnavailable: ``arch`` is not one this module knows (say which).
        ValueError: an unknown system call name or an errno out of range.
    """
    arch = native_arch() if arch is None else _MACHINE_ALIASES.get(arch.lower(), arch.lower())
    if arch not in _ARCHES:
        raise SandboxUnavailable(
            f"gem_core.sandbox.seccomp: no system call table for the architecture {arch!r} "
            f"(known: {', '.join(SUPPORTED_ARCHES)}); sandboxes here run without a seccomp "
            "filter. Add the numbers for this architecture to gem_core/sandbox/seccomp.py.")
    audit_arch, numbers, foreign_abi = _ARCHES[arch]
    names = list(dict.fromkeys(deny))
    unknown = [n for n in names if n not in numbers or n in ("clone", "clone3", "unshare")]
    if unknown:
        raise InvalidArgument(
            f"build_filter(deny=...): unknown system call(s) {unknown} for {arch}; known: "
            f"{', '.join(n for n in numbers if n not in ('clone', 'clone3', 'unshare'))} "
            "(user namespaces are refused with deny_user_namespaces=True)")
    if isinstance(errno, bool) or not isinstance(errno, int) or not 0 < errno < 4096:
        raise InvalidArgument(f"build_filter(errno=...) must be an errno between 1 and 4095, got {errno!r}")

    # Instructions as (code, jump-true label, jump-false label, k); labels are resolved to
    # relative offsets at the end ("next" = fall through).
    prog: list[tuple[int, str, str, int]] = [
        (_LD_W_ABS, "next", "next", _OFF_ARCH),
        (_JEQ_K, "native", "kill", audit_arch),
    ]
    labels = {"native": 2}
    prog.append((_LD_W_ABS, "next", "next", _OFF_NR))
    if foreign_abi is not None:
        prog.append((_JGE_K, "deny", "next", foreign_abi))
    for name in names:
        prog.append((_JEQ_K, "deny", "next", numbers[name]))
    if deny_user_namespaces:
        prog.append((_JEQ_K, "enosys", "next", numbers["clone3"]))
        prog.append((_JEQ_K, "flags", "next", numbers["clone"]))
        prog.append((_JEQ_K, "flags", "next", numbers["unshare"]))
    prog.append((_RET_K, "next", "next", _RET_ALLOW))
    if deny_user_namespaces:
        labels["flags"] = len(prog)
        prog.append((_LD_W_ABS, "next", "next", _OFF_ARG0_LOW))
        prog.append((_JSET_K, "deny", "allow", _CLONE_NEWUSER))
        labels["allow"] = len(prog)
        prog.append((_RET_K, "next", "next", _RET_ALLOW))
        labels["enosys"] = len(prog)
        prog.append((_RET_K, "next", "next", _RET_ERRNO | _errno.ENOSYS))
    labels["deny"] = len(prog)
    prog.append((_RET_K, "next", "next", _RET_ERRNO | errno))
    labels["kill"] = len(prog)
    prog.append((_RET_K, "next", "next", _RET_KILL_PROCESS))

    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        offsets = []
        for label in (jt, jf):
            target = i + 1 if label == "next" else labels[label]
            offset = target - i - 1
            assert 0 <= offset <= 255, "a seccomp jump out of range"
            offsets.append(offset)
        out += struct.pack("=HBBI", code, offsets[0], offsets[1], k)
    return bytes(out)


def filter_fd(program: bytes) -> int:
    """A readable file descriptor holding ``program``, for ``bwrap --seccomp FD``.

    It is the read end of a pipe whose write end is already closed (bubblewrap reads to
    the end of file). Pass it to the child (``subprocess.Popen(..., pass_fds=(fd,))``)
    and close it in the parent once the child has started; each bubblewrap needs its own.

    Raises:
        ValueError: ``program`` is not a whole number of 8-byte instructions, or is too
            long to fit a pipe without blocking (bubblewrap allows 4096 instructions).
    """
    if not program or len(program) % 8 or len(program) > 4096 * 8:
        raise InvalidArgument(f"filter_fd(program): expected 1 to 4096 BPF instructions of 8 bytes, got {len(program)} bytes")
    read, write = os.pipe()
    try:
        os.write(write, program)  # far below a pipe's capacity (64 KiB): never blocks
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
