"""`gem_core.sandbox.seccomp`: the compiled filter, and what it denies inside `Shell` runs."""

from __future__ import annotations

import os
import struct
import warnings

import pytest

from gem_core.errors import SandboxUnavailable
from gem_core.sandbox import ReducedIsolationWarning, detect_isolation
from gem_core.sandbox.seccomp import (
    DEFAULT_DENY,
    SUPPORTED_ARCHES,
    build_filter,
    filter_fd,
    native_arch,
)
from gem_core.sandbox.shell import Shell

pytestmark = pytest.mark.timeout(60)

ISOLATION, WHY_NOT = detect_isolation()
requires_bwrap = pytest.mark.skipif(
    ISOLATION != "bwrap",
    reason=f"bubblewrap does not work here ({WHY_NOT.get('bwrap', 'unknown')}): the filter is "
           "applied through bwrap --seccomp (apt-get install bubblewrap)",
)
requires_filter = pytest.mark.skipif(
    native_arch() not in SUPPORTED_ARCHES, reason=f"no system call table for {native_arch()}")
X86_64 = pytest.mark.skipif(native_arch() != "x86_64", reason="x86-64 machine code")


def _decode(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]


@pytest.mark.parametrize("arch", SUPPORTED_ARCHES)
def test_the_program_checks_the_architecture_first_and_every_jump_lands_inside(arch):
    program = build_filter(arch=arch)
    insns = _decode(program)
    audit = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[arch]
    assert insns[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
    assert insns[1][0] == 0x15 and insns[1][3] == audit  # jeq AUDIT_ARCH_*
    assert insns[-1] == (0x06, 0, 0, 0x80000000)  # another ABI: kill the process
    for i, (code, jt, jf, _) in enumerate(insns):
        if code & 0x07 == 0x05:  # BPF_JMP
            assert i + 1 + max(jt, jf) < len(insns)
    assert insns[-1][0] == 0x06 and all(code != 0 for code, *_ in insns)
    assert (0x06, 0, 0, 0x00050000 | 1) in insns  # denied: EPERM


def test_errors_name_what_was_expected():
    with pytest.raises(SandboxUnavailable, match=r"no system call table for the architecture 'riscv64' \(known: x86_64, aarch64\)"):
        build_filter(arch="riscv64")
    with pytest.raises(ValueError, match=r"unknown system call\(s\) \['fork_bomb'\] for x86_64"):
        build_filter(["ptrace", "fork_bomb"], arch="x86_64")
    with pytest.raises(ValueError, match="errno between 1 and 4095, got 0"):
        build_filter(errno=0, arch="x86_64")
    with pytest.raises(ValueError, match="expected 1 to 4096 BPF instructions of 8 bytes, got 3 bytes"):
        filter_fd(b"abc")


def test_filter_fd_is_a_pipe_holding_the_program():
    program = build_filter(arch="aarch64")
    fd = filter_fd(program)
    try:
        assert os.read(fd, 1 << 16) == program and os.read(fd, 1) == b""  # EOF: write end closed
    finally:
        os.close(fd)
    assert set(DEFAULT_DENY) >= {"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"}


@pytest.fixture(scope="module")
def sh():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReducedIsolationWarning)
        shell = Shell(timeout_s=10)
    shell.reset_workspace()
    yield shell
    shell.close()


_CALL = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = {"x86_64": {"ptrace": 101, "process_vm_readv": 310, "pidfd_getfd": 438, "unshare": 272,
                 "clone3": 435},
      "aarch64": {"ptrace": 117, "process_vm_readv": 270, "pidfd_getfd": 438, "unshare": 97,
                  "clone3": 435}}[os.uname().machine]
args = {"ptrace": (16, os.getppid(), 0, 0), "process_vm_readv": (os.getppid(), 0, 0, 0, 0, 0),
        "pidfd_getfd": (0, 0, 0), "unshare": (0x10000000,), "clone3": (0, 0)}
for name in ("ptrace", "process_vm_readv", "pidfd_getfd", "unshare", "clone3"):
    ret = libc.syscall(ctypes.c_long(nr[name]), *map(ctypes.c_long, args[name]))
    print(name, ret, os.strerror(ctypes.get_errno()) if ret < 0 else "ok")
'''


@requires_bwrap
@requires_filter
def test_shell_runs_cannot_reach_other_processes_nor_make_user_namespaces(sh):
    """Regression: a command could ptrace a process of its own uid (this host has no Yama) and
    create user namespaces."""
    result = sh.run(f"sleep 5 & python3 -c '{_CALL}'")
    lines = dict(line.split(" ", 1) for line in result.output.splitlines())
    assert lines == {"ptrace": "-1 Operation not permitted",
                     "process_vm_readv": "-1 Operation not permitted",
                     "pidfd_getfd": "-1 Operation not permitted",
                     "unshare": "-1 Operation not permitted",
                     "clone3": "-1 Function not implemented"}, result.output
    userns = sh.run("unshare --user --map-root-user true; echo rc=$?")
    assert "Operation not permitted" in userns.output and userns.output.endswith("rc=1\n"), userns.output
    # What the filter leaves alone still works: threads (clone3 falls back to clone), forks.
    ok = sh.run("python3 -c 'import threading; t = threading.Thread(target=print, args=(\"thread\",)); "
                "t.start(); t.join()' && (echo subshell) && ls / > /dev/null && echo done")
    assert ok.output == "thread\nsubshell\ndone\n", ok.output


@requires_bwrap
@X86_64
def test_another_abi_is_killed_and_x32_denied(sh):
    """The arch check: i386 `int 0x80` kills the process; x32 numbers fail with EPERM, so a
    denied call cannot be reached through another system call table."""
    run = r'''
import ctypes, mmap, sys
code = {"i386": b"\xb8\x14\x00\x00\x00\xcd\x80\xc3",  # mov eax, 20 (getpid); int 0x80; ret
        "x32": b"\xb8\x65\x00\x00\x40\x0f\x05\xc3"}[sys.argv[1]]  # mov eax, 0x40000065 (x32 ptrace); syscall; ret
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
print(ctypes.CFUNCTYPE(ctypes.c_long)(addr)(), flush=True)
'''
    result = sh.run(f"cat > abi.py <<'PY'\n{run}\nPY\npython3 abi.py i386; echo rc=$?; python3 abi.py x32")
    lines = result.output.splitlines()
    assert lines[-2:] == ["rc=159", "-1"], result.output  # 128 + SIGSYS; -EPERM


# Per family: a call that works on this host outside the sandbox, with harmless arguments.
_FAMILIES = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
x86 = os.uname().machine == "x86_64"
nr = dict(add_key=248 if x86 else 217, keyctl=250 if x86 else 219, mq_open=240 if x86 else 180,
          io_uring_setup=425, perf_event_open=298 if x86 else 241, bpf=321 if x86 else 280)
buf = ctypes.create_string_buffer(512)
calls = {
    # add_key("user", "gem-probe", "SECRET", 6, KEY_SPEC_USER_KEYRING): state that outlives the run
    "add_key": (ctypes.c_char_p(b"user"), ctypes.c_char_p(b"gem-probe"), ctypes.c_char_p(b"SECRET"),
                ctypes.c_long(6), ctypes.c_long(-4)),
    # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)
    "keyctl": (ctypes.c_long(0), ctypes.c_long(-4), ctypes.c_long(0)),
    "mq_open": (ctypes.c_char_p(b"gem-probe"), ctypes.c_long(os.O_CREAT | os.O_RDWR), ctypes.c_long(0o600), ctypes.c_long(0)),
    "io_uring_setup": (ctypes.c_long(4), buf),
    "perf_event_open": (buf, ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1), ctypes.c_long(0)),
    "bpf": (ctypes.c_long(0), buf, ctypes.c_long(64)),
}
for name, args in calls.items():
    ret = libc.syscall(ctypes.c_long(nr[name]), *args)
    print(name, "ok" if ret >= 0 else os.strerror(ctypes.get_errno()))
'''
_DENIED = {name: "Operation not permitted" for name in
           ("add_key", "keyctl", "mq_open", "io_uring_setup", "perf_event_open", "bpf")}


def _family_lines(output: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in output.splitlines() if " " in line)


@requires_bwrap
@requires_filter
def test_shell_runs_cannot_use_keyrings_message_queues_io_uring_perf_or_bpf(sh):
    """Regression (hostile output, part 2): a run stored a key in its uid's keyring and the
    next run read it; io_uring, perf events, eBPF and POSIX queues were open."""
    result = sh.run(f"python3 -c '{_FAMILIES}'")
    assert _family_lines(result.output) == _DENIED, result.output
    again = sh.run("python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
                   "print(libc.syscall(250 if os.uname().machine == \"x86_64\" else 219, 11, -4, 0, 0))'")
    assert again.output.strip() == "-1", again.output  # KEYCTL_READ of the user keyring: nothing to read


@requires_bwrap
@requires_filter
def test_python_sandbox_runs_cannot_use_keyrings_message_queues_io_uring_perf_or_bpf():
    from gem_core.sandbox import Sandbox

    with Sandbox(size=1) as box:
        first = box.run(_FAMILIES)
        assert _family_lines(first.stdout) == _DENIED, (first.stdout, first.stderr)
        second = box.run(_FAMILIES)  # the same slot's next run: nothing was left to find
        assert _family_lines(second.stdout) == _DENIED, (second.stdout, second.stderr)


def test_the_default_filter_names_every_family():
    for name in ("add_key", "request_key", "keyctl", "mq_open", "io_uring_setup", "io_uring_enter",
                 "io_uring_register", "perf_event_open", "bpf"):
        assert name in DEFAULT_DENY
    for arch in SUPPORTED_ARCHES:
        build_filter(arch=arch)  # every default name has a number on every arch
