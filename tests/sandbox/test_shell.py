"""`gem_core.sandbox.Shell`: isolation, limits, timeouts, output caps and workspace lifecycle."""

from __future__ import annotations

import os
import shutil
import time
import warnings

import pytest

from gem_core.errors import InvalidArgument, SandboxClosed
from gem_core.sandbox import ReducedIsolationWarning, detect_isolation
from gem_core.sandbox import shell as shell_module
from gem_core.sandbox.shell import MAX_COMMAND_BYTES, Shell

pytestmark = pytest.mark.timeout(60)

ISOLATION, WHY_NOT = detect_isolation()
requires_bwrap = pytest.mark.skipif(
    ISOLATION != "bwrap",
    reason=f"bubblewrap does not work here ({WHY_NOT.get('bwrap', 'unknown')}): the file-system "
           "and network isolation of the shell cannot be tested (apt-get install bubblewrap)",
)
HAS_PYTHON3 = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") is not None
requires_python3 = pytest.mark.skipif(not HAS_PYTHON3, reason="no python3 on the sandbox PATH")


@pytest.fixture
def sh():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReducedIsolationWarning)
        shell = Shell(timeout_s=5, max_output_bytes=4096)
    shell.reset_workspace()
    yield shell
    shell.close()


def test_runs_in_the_workspace_and_reports_exit_code(sh):
    result = sh.run("echo out; echo err >&2; pwd; exit 3")
    assert result.exit_code == 3 and not result.ok and not result.timed_out
    lines = result.output.splitlines()
    assert lines[:2] == ["out", "err"]  # one pipe: interleaved as written
    assert lines[2] == sh.cwd
    assert sh.run("true").ok


def test_files_persist_but_cd_and_variables_do_not(sh):
    assert sh.run("mkdir sub && echo hello > sub/a.txt && cd sub && export X=1").ok
    result = sh.run('cat sub/a.txt; pwd; echo "X=${X:-unset}"')
    assert result.output.splitlines() == ["hello", sh.cwd, "X=unset"]
    with open(os.path.join(sh.workspace, "sub", "a.txt")) as f:
        assert f.read() == "hello\n"


@requires_bwrap
def test_bwrap_workspace_path_and_private_tmp(sh):
    assert sh.isolation == "bwrap" and sh.cwd == "/workspace"
    assert sh.run("echo secret > /tmp/gem-shell-test-marker && cat /tmp/gem-shell-test-marker").ok
    result = sh.run("cat /tmp/gem-shell-test-marker")
    assert result.exit_code != 0 and "No such file" in result.output
    assert not os.path.exists("/tmp/gem-shell-test-marker")


def test_output_flood_is_bounded(sh):
    result = sh.run("yes 0123456789 | head -c 3000000; echo; echo THE-END")
    assert result.ok
    assert result.truncated and result.total_bytes == 3000000 + len("\nTHE-END\n")
    assert len(result.output.encode()) < 4096 + 100
    assert "bytes omitted ...]" in result.output
    assert result.output.startswith("0123456789\n") and result.output.endswith("THE-END\n")


def test_infinite_loop_is_killed_within_the_timeout_and_the_shell_goes_on(sh):
    start = time.monotonic()
    result = sh.run("echo start; while :; do :; done", timeout=1)
    elapsed = time.monotonic() - start
    assert result.timed_out and result.exit_code == -9 and not result.ok
    assert result.output == "start\n"
    assert elapsed < 4, f"a 1 s timeout took {elapsed:.1f} s"
    assert sh.run("echo alive").output == "alive\n"


def test_background_processes_do_not_outlive_their_command(sh):
    if ISOLATION != "bwrap" and sh._uid is None:
        pytest.skip("without bubblewrap or a dropped uid a setsid'd process can escape (documented)")
    result = sh.run("(setsid sleep 30 > /dev/null 2>&1 &); sleep 30 > /dev/null 2>&1 & echo started")
    assert result.output == "started\n" and result.duration_s < 3
    if sh._uid is not None:
        deadline = time.monotonic() + 3
        while True:
            left = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == sh._uid]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not left, f"processes of the shell's uid survived the command: {left}"


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


@requires_bwrap
def test_writing_outside_the_workspace_fails(sh):
    for target in ("/usr/gem-evil", "/etc/gem-evil", "/gem-evil", "/bin/gem-evil"):
        result = sh.run(f"echo pwned > {target} && echo WROTE")
        assert result.exit_code != 0, target
        assert "WROTE" not in result.output
        assert "Read-only file system" in result.output or "Permission denied" in result.output
        assert not os.path.exists(target)


@requires_bwrap
def test_no_network_inside(sh):
    result = sh.run("exec 3<>/dev/tcp/1.1.1.1/53 && echo CONNECTED")
    assert result.exit_code != 0 and "CONNECTED" not in result.output
    assert "Network is unreachable" in result.output or "Connection refused" in result.output
    interfaces = sh.run("cat /proc/net/dev").output
    assert "lo:" in interfaces and "eth0" not in interfaces


@requires_bwrap
def test_read_only_run_and_task_files(sh):
    assert sh.run("echo original > data.txt").ok
    result = sh.run('cat "$GEM_TASK_DIR/check.sh"; echo x > data.txt; echo y > "$GEM_TASK_DIR/check.sh"',
                    read_only=True, files={"check.sh": "echo checking\n"})
    assert result.output.startswith("echo checking\n")
    assert result.output.count("Read-only file system") == 2
    assert sh.run("cat data.txt").output == "original\n"
    assert sh.run('echo "${GEM_TASK_DIR:-none}"').output == "none\n"  # files exist for one run only


def test_read_only_run_cannot_change_the_workspace_at_any_isolation(sh):
    assert sh.run("echo original > data.txt").ok
    sh.run("echo changed > data.txt; rm -f data.txt; touch new.txt", read_only=True)
    assert sh.run("cat data.txt; ls").output == "original\ndata.txt\n"


def test_file_size_limit():
    with Shell(timeout_s=5, file_size_mb=1) as sh:
        sh.reset_workspace()
        result = sh.run("head -c 5000000 /dev/zero > big; echo rc=$?")
        assert "rc=153" in result.output  # 128 + SIGXFSZ
        assert os.path.getsize(os.path.join(sh.workspace, "big")) <= 1 << 20


@requires_python3
def test_memory_and_process_limits():
    with Shell(timeout_s=5, memory_mb=256, max_processes=8) as sh:
        sh.reset_workspace()
        result = sh.run("python3 -c 'x = bytearray(512 * 1024 * 1024)'")
        assert result.exit_code == 1 and "MemoryError" in result.output
        if sh._uid is None and os.geteuid() == 0:
            pytest.skip("root without setpriv: RLIMIT_NPROC does not bind root")
        forks = sh.run(
            "python3 -c '\n"
            "import os, time\n"
            "n = 0\n"
            "try:\n"
            "    for _ in range(50):\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(5); os._exit(0)\n"
            "        n += 1\n"
            "except OSError:\n"
            "    pass\n"
            "print(n)'")
        assert forks.ok, forks
        assert int(forks.output) < 8, f"{forks.output.strip()} forks passed max_processes=8"


def test_snapshots_restore_files_and_modes(sh):
    assert sh.run("mkdir -p d && echo one > d/f && chmod 600 d/f && ln -s d/f link").ok
    sh.save_snapshot("setup")
    assert sh.run("rm -rf d link && echo other > g").ok
    old = sh.workspace
    sh.reset_workspace(snapshot="setup")
    assert not os.path.exists(old)
    result = sh.run("cat link; stat -c %a d/f; ls")
    assert result.output == "one\n600\nd\nlink\n"
    assert sh.run("echo two >> d/f && cat d/f").output == "one\ntwo\n"  # writable by the command
    with pytest.raises(InvalidArgument, match=r"no such snapshot; saved: \['setup'\]"):
        sh.reset_workspace(snapshot="nope")


def test_workspace_is_removed_on_reset_and_close():
    shell = Shell()
    first = shell.reset_workspace()
    assert shell.run("mkdir locked && touch locked/f && chmod 000 locked").ok
    second = shell.reset_workspace()
    assert not os.path.exists(first) and os.path.isdir(second)
    root = os.path.dirname(second)
    shell.close()
    shell.close()
    assert not os.path.exists(root)
    with pytest.raises(SandboxClosed, match="this Shell is closed; create a new one"):
        shell.run("true")


def test_misuse_raises_with_a_clear_message():
    with pytest.raises(InvalidArgument, match=r"Shell\(timeout_s=...\) must be a positive number, got 0"):
        Shell(timeout_s=0)
    with pytest.raises(InvalidArgument, match="expects 'auto', 'bwrap', 'netns' or 'rlimits', got 'docker'"):
        Shell(isolation="docker")  # type: ignore[arg-type]
    with Shell() as sh:
        with pytest.raises(InvalidArgument, match=r"needs a workspace: call reset_workspace\(\) first"):
            sh.run("true")
        sh.reset_workspace()
        with pytest.raises(InvalidArgument, match="got a NUL byte"):
            sh.run("echo \x00")
        with pytest.raises(InvalidArgument, match=f"at most {MAX_COMMAND_BYTES} are allowed"):
            sh.run("#" * (MAX_COMMAND_BYTES + 1))
        with pytest.raises(InvalidArgument, match="names must be plain file names, got '../x'"):
            sh.run("true", files={"../x": "y"})
        # text that is not valid Unicode is replaced, not an error
        assert sh.run("echo '\ud800'").ok


def test_reduced_isolation_fallback_warns_and_still_bounds(monkeypatch):
    monkeypatch.setattr(shell_module, "detect_isolation",
                        lambda: ("rlimits", {"bwrap": "bwrap is not on PATH"}))
    monkeypatch.setattr(shell_module, "_WARNED", False)
    with pytest.warns(ReducedIsolationWarning, match=r"bubblewrap is unavailable \(bwrap: bwrap is not on PATH\)"):
        sh = Shell(timeout_s=1)
    try:
        assert sh.isolation == "rlimits"
        ws = sh.reset_workspace()
        assert sh.cwd == ws
        result = sh.run("pwd; echo $TMPDIR")
        assert result.output.splitlines()[0] == ws
        assert not result.output.splitlines()[1].startswith(ws)  # $TMPDIR is outside the workspace
        start = time.monotonic()
        assert sh.run("while :; do :; done").timed_out
        assert time.monotonic() - start < 4
        assert sh.run("echo ok").output == "ok\n"
    finally:
        sh.close()
