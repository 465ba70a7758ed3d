"""`gem_core.sandbox.Shell`: isolation, limits, timeouts, output caps and workspace lifecycle."""

from __future__ import annotations

import os
import shutil
import stat
import time
import warnings

import pytest

from gem_core.errors import InvalidArgument, SandboxClosed, SandboxUnavailable
from gem_core.sandbox import ReducedIsolationWarning, detect_isolation, isolation
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
    assert "\n... [" in result.output and " bytes truncated] ...\n" in result.output
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


_MKDIR_FOREVER = (
    "python3 -c \"import os\nn = 0\nwhile True:\n    os.mkdir(f'd{n}')\n    n += 1\"")


@requires_python3
def test_a_workspace_filled_with_directories_does_not_stall_the_next_reset():
    # Regression: a command making directories as fast as it can left ~100,000s before
    # the workspace cap caught it; reset_workspace (the next episode) then spent ~8 s
    # removing them inline. The old workspace now goes in the background.
    with Shell(timeout_s=10) as shell:
        first = shell.reset_workspace()
        filled = shell.run(_MKDIR_FOREVER)
        assert filled.workspace_over_limit, filled
        start = time.monotonic()
        second = shell.reset_workspace()
        assert time.monotonic() - start < 1.0  # ~1 ms here; removing inline took seconds
        assert not os.path.exists(first) and os.listdir(second) == []
        assert shell.run("echo ok").output == "ok\n"
        shell._trash.wait()
        root = os.path.dirname(second)
        assert not [n for n in os.listdir(root) if n.startswith(".trash-")]  # and it went


def test_trash_removes_one_tree_at_a_time(tmp_path):
    from gem_core.sandbox._trash import Trash

    removing = []

    def slow_remove(path):
        removing.append(path)
        time.sleep(0.3)
        shutil.rmtree(path)

    trash = Trash(slow_remove)
    for name in ("a", "b"):
        (tmp_path / name / "sub").mkdir(parents=True)
    start = time.monotonic()
    trash.discard(str(tmp_path / "a"))
    assert time.monotonic() - start < 0.3 and not (tmp_path / "a").exists()
    trash.discard(str(tmp_path / "b"))  # waits for "a": trash never piles up
    assert time.monotonic() - start >= 0.3 and len(removing) == 2
    trash.wait()
    assert sorted(os.listdir(tmp_path)) == []
    trash.discard(str(tmp_path / "missing"))  # absent: nothing to do


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
    monkeypatch.setattr(isolation, "detect_isolation",
                        lambda: ("rlimits", {"bwrap": "bwrap is not on PATH"}))
    monkeypatch.setattr(isolation, "_WARNED", set())
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


# ------------------------------------------------------------------ the workspace cap

MiB = 1024 * 1024
_WRITE_FOREVER = "i=0; while :; do head -c 1048576 /dev/zero > f$i || exit 9; i=$((i+1)); done"


def _capped(**kwargs) -> Shell:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReducedIsolationWarning)
        shell = Shell(timeout_s=10, max_workspace_mb=8, **kwargs)
    shell.reset_workspace()
    return shell


@pytest.mark.parametrize("isolation", ["auto", "rlimits"])
def test_a_writer_past_the_workspace_cap_is_killed_and_reported(isolation):
    with _capped(isolation=isolation) as sh:
        small = sh.run("echo hi > a && mkdir d")
        assert small.ok and not small.workspace_over_limit
        assert small.workspace_files == 2 and 0 < small.workspace_bytes < 64 * 1024
        start = time.monotonic()
        result = sh.run(_WRITE_FOREVER)
        assert time.monotonic() - start < 4, "the writer was not stopped by the workspace cap"
        assert result.workspace_over_limit and not result.timed_out
        assert result.exit_code == -9  # killed while running, not by the 10 s timeout
        assert result.workspace_bytes > 8 * MiB
        assert sh.workspace_usage()[2] is True  # left as it is: the caller removes it
        sh.remove_workspace()
        assert sh.reset_workspace() and sh.run("true").workspace_over_limit is False


def test_a_quick_command_over_the_cap_is_caught_afterwards(monkeypatch):
    monkeypatch.setattr(shell_module, "_DISK_POLL_S", 60.0)  # only the check after the command
    with _capped() as sh:
        result = sh.run("head -c 9437184 /dev/zero > big && echo wrote")
        assert result.output == "wrote\n" and result.exit_code == 0
        assert result.workspace_over_limit and result.workspace_bytes > 8 * MiB


def test_the_file_count_cap():
    with _capped(max_workspace_files=50) as sh:
        assert not sh.run("touch f{1..50}").workspace_over_limit
        result = sh.run("touch g{1..10}")
        assert result.workspace_over_limit and result.workspace_files == 51  # stopped early


def test_the_walk_never_follows_symlinks_and_counts_hard_links_once(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"\x01" * (20 * MiB))  # outside the workspace, real blocks
    with _capped() as sh:
        ws = sh.workspace
        os.symlink(str(big), os.path.join(ws, "to-big"))
        os.symlink("/", os.path.join(ws, "to-root"))
        os.symlink(".", os.path.join(ws, "self"))
        os.symlink("loop-b", os.path.join(ws, "loop-a"))
        os.symlink("loop-a", os.path.join(ws, "loop-b"))
        start = time.monotonic()
        used, entries, over = sh.workspace_usage()
        assert time.monotonic() - start < 0.5
        assert (entries, over) == (5, False) and used < 64 * 1024
        result = sh.run("head -c 5242880 /dev/zero > five && ln five a && ln five b && ls")
        assert result.ok and not result.workspace_over_limit
        assert 5 * MiB <= result.workspace_bytes < 6 * MiB


def _open_as(fail):
    """``os.open`` that raises ``fail(name, lstat)`` (an OSError, or None to pass) first."""
    real_open = os.open

    def fake_open(path, flags, mode=0o777, *, dir_fd=None):
        error = fail(path, os.lstat(path, dir_fd=dir_fd))
        if error is not None:
            raise error
        return real_open(path, flags, mode, dir_fd=dir_fd)

    return fake_open


def test_an_unreadable_directory_is_still_measured(monkeypatch):
    with _capped() as sh:
        assert sh.run("mkdir hide && head -c 9437184 /dev/zero > hide/big && chmod 000 hide").ok is True
        # as a non-root host sees a chmod 000 directory
        monkeypatch.setattr(os, "open", _open_as(lambda name, st: PermissionError(13, "Permission denied", name)
                                                 if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IRUSR else None))
        used, _, over = sh.workspace_usage()
        assert over and used > 8 * MiB
        assert stat.S_IMODE(os.lstat(os.path.join(sh.workspace, "hide")).st_mode) == 0  # put back


def test_what_cannot_be_measured_counts_as_over_the_limit(monkeypatch):
    """Fail closed: before, any error but a permission one skipped the entry as empty."""
    with _capped() as sh:
        assert sh.run("mkdir -p a/b && echo x > a/b/f").ok
        monkeypatch.setattr(os, "open", _open_as(lambda name, st: OSError(5, "Input/output error", name)
                                                 if name == "b" else None))
        assert sh.workspace_usage()[2] is True
        monkeypatch.undo()
        assert sh.workspace_usage()[2] is False


@requires_python3
def test_files_below_a_path_longer_than_path_max_are_counted():
    """Regression: the walk used whole paths, so below 4,096 bytes of path every entry failed
    with ENAMETOOLONG and counted as empty: 382 MiB went into a 256 MiB workspace."""
    with _capped(file_size_mb=16) as sh:
        result = sh.run("python3 -c 'import os\nfor _ in range(30):\n    os.mkdir(\"d\" * 200); os.chdir(\"d\" * 200)\n"
                        "open(\"x\", \"wb\").write(bytes(6 << 20))'")
        assert result.ok, result.output
        used, entries, over = sh.workspace_usage()
        assert (entries, over) == (31, False) and used > 6 * MiB
        result = sh.run("python3 -c 'import os\nfor _ in range(30):\n    os.chdir(\"d\" * 200)\n"
                        "open(\"y\", \"wb\").write(bytes(4 << 20))'")
        assert result.workspace_over_limit and result.workspace_bytes > 8 * MiB, result


def test_workspace_cap_arguments():
    with pytest.raises(InvalidArgument, match=r"Shell\(max_workspace_mb=...\) must be a positive number or None \(no cap\), got 0"):
        Shell(max_workspace_mb=0)
    with Shell(max_workspace_mb=None, max_workspace_files=None) as sh:
        sh.reset_workspace()
        result = sh.run("head -c 1000 /dev/zero > x")
        assert (result.workspace_bytes, result.workspace_files, result.workspace_over_limit) == (None, None, False)
    with _capped() as sh:
        assert sh.run("true", read_only=True).workspace_bytes is None  # a read-only run cannot grow it


@requires_bwrap
def test_the_private_tmp_is_capped_too():
    if not isolation.bwrap_has_size():
        pytest.skip("this bubblewrap has no --size (0.8+): the private /tmp is uncapped")
    with _capped() as sh:
        result = sh.run("head -c 9437184 /dev/zero > /tmp/x; echo rc=$?")
        assert "No space left on device" in result.output and result.output.endswith("rc=1\n")
        assert not result.workspace_over_limit  # /tmp is memory, not the workspace
        assert sh.run("head -c 4194304 /dev/zero > /tmp/y && echo fits").output == "fits\n"


# ------------------------------------------------------------------ grader runs


@requires_bwrap
@requires_python3
def test_a_grader_run_keeps_its_files_and_process_from_the_agents_programs(sh):
    """Regression: a test script and the agent's program it ran shared one uid, so the
    program could read the script (its expected values) and trace or signal it."""
    if sh._uid is None:
        pytest.skip("two identities need a root host (a uid of its own for the grader)")
    assert sh.run("mkdir private && echo s3cret > private/key && chmod 600 private/key && chmod 700 private").ok
    probe = (
        "import os, signal\n"
        "for path in ('/task/test.sh', f'/proc/{os.getppid()}/mem', f'/proc/{os.getppid()}/fd/255'):\n"
        "    try:\n"
        "        open(path, 'rb').read(1); print('READ', path)\n"
        "    except OSError as e:\n"
        "        print('denied', e.strerror)\n"
        "try:\n"
        "    os.kill(os.getppid(), signal.SIGKILL); print('KILLED')\n"
        "except OSError as e:\n"
        "    print('denied', e.strerror)\n"
    )
    command = ('cat private/key && id -u && cat > /tmp/probe.py <<\'PY\'\n' + probe + 'PY\n'
               'as_agent id -u && as_agent python3 /tmp/probe.py && echo driver-alive')
    result = sh.run(command, read_only=True, grader=True, files={"test.sh": "echo expected=42\n"})
    lines = result.output.splitlines()
    assert result.ok, result.output
    assert lines[0] == "s3cret"  # the grader reads the agent's files whatever their modes
    grader_uid, agent_uid = int(lines[1]), int(lines[2])
    assert grader_uid != agent_uid == sh._uid
    assert lines[3:] == ["denied Permission denied"] * 3 + ["denied Operation not permitted", "driver-alive"]
    # An ordinary run is the agent's: its files are readable by it, and as_agent is absent.
    plain = sh.run('id -u; cat "$GEM_TASK_DIR/t"; type as_agent >/dev/null 2>&1 || echo none', files={"t": "x\n"})
    assert plain.output == f"{agent_uid}\nx\nnone\n"


# ------------------------------------------------------------------ deep trees

_DEEP_TREE = ("python3 -c 'import os\nfor _ in range(1500):\n    os.mkdir(\"dddd\"); os.chdir(\"dddd\")\n"
              "open(\"leaf\", \"w\").write(\"x\")' && echo built")  # a 7,500-byte path


@requires_python3
def test_a_deep_tree_is_removed_by_reset_and_close():
    """Regression: a 1,500-level tree made reset_workspace()/close() raise RecursionError
    (shutil.rmtree) and left the workspace on the host. (`TerminalEnv`'s test does it
    under bubblewrap; here the reduced isolation, whose read-only runs copy the tree.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReducedIsolationWarning)
        shell = Shell(isolation="rlimits", timeout_s=20)
    first = shell.reset_workspace()
    result = shell.run(_DEEP_TREE + " && chmod 000 dddd/dddd")
    assert result.output == "built\n" and not result.workspace_over_limit, result
    assert result.workspace_files == 1501
    copied = shell.run("echo graded", read_only=True)  # a failed run, not an exception
    assert copied.output == "graded\n" or copied.output.startswith(
        "gem shell: the workspace could not be copied for a read-only run"), copied
    second = shell.reset_workspace()
    assert not os.path.exists(first)
    assert shell.run(_DEEP_TREE).ok
    root = os.path.dirname(second)
    shell.close()
    assert not os.path.exists(root)


# ------------------------------------------------------------------ uids per shell


def test_live_shells_never_share_a_uid():
    """Regression: the dropped uid was 2e9 + (pid % 100000) * 1000 + (a counter % 1000), so the
    1,001st Shell of a process shared the first one's uid (and process limit) while both lived."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("uids are dropped only by a root host with setpriv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReducedIsolationWarning)
        first = Shell()
        for _ in range(999):
            Shell().close()
        later = Shell()
        # As many as a process may hold (with those other tests left alive; 256 where pid_max
        # is 32768), each with an agent and a grader uid.
        most = shell_module._UIDS_PER_PID // 2
        live = [Shell() for _ in range(most - len(shell_module._UID_SLOTS))]
    try:
        first.reset_workspace()
        later.reset_workspace()
        assert first.run("id -u").output != later.run("id -u").output
        uids = {u for sh in [first, later, *live] for u in (sh._uid, sh._grader_uid)}
        assert len(uids) == 2 * (2 + len(live)) and len(shell_module._UID_SLOTS) == most
        assert min(uids) >= 2_200_000_000 and max(uids) < 2**32 - 1
        with pytest.raises(SandboxUnavailable, match=f"{most} Shells are alive in this process, each holding two uids"):
            Shell()
        live.pop().close()  # a closed shell gives its uids back
        live.append(Shell())
    finally:
        for sh in [first, later, *live]:
            sh.close()


# ------------------------------------------------------------------ hidden package data


def _a_dir_under_usr() -> str:
    for name in sorted(os.listdir("/usr/share")):
        path = os.path.join("/usr/share", name)
        if os.path.isdir(path) and not os.path.islink(path) and os.listdir(path):
            return path
    pytest.skip("no directory with entries under /usr/share")


@requires_bwrap
def test_the_installed_package_and_datasets_are_hidden_inside(monkeypatch):
    """Regression: with a non-editable install (site-packages under /usr, bound read-only into
    the sandbox) a command could read the terminal tasks' test.sh and solution.sh and the
    data samples with their answers. Faked here: the 'installed package' and $GEM_DATA_DIR
    are directories under /usr."""
    package, data = _a_dir_under_usr(), "/usr/share/zoneinfo"
    monkeypatch.setattr(isolation, "package_dirs", lambda: [package])
    monkeypatch.setenv("GEM_DATA_DIR", data if os.path.isdir(data) else package)
    with Shell(timeout_s=10) as sh:
        sh.reset_workspace()
        result = sh.run(f"ls -A {package} | wc -l; ls -A {data} 2>/dev/null | wc -l; "
                        f"touch {package}/x 2>&1; ls /usr/bin/bash")
        lines = result.output.splitlines()
        assert lines[:2] == ["0", "0"], result.output
        assert "Read-only file system" in lines[2] and lines[3] == "/usr/bin/bash"
    # The real layout: nothing of gem_core is reachable, wherever it is installed.
    with Shell(timeout_s=20) as sh:
        sh.reset_workspace()
        found = sh.run("find / -path /proc -prune -o \\( -name solution.sh -o -name 'gem_core*' \\) -print "
                       "2>/dev/null | head -n 3")
        assert found.output == "", found.output


FORK_AND_EXIT = (
    "import gc, os, sys, warnings\n"
    "warnings.simplefilter('ignore')\n"
    "from gem_core.sandbox.shell import Shell\n"
    "sh = Shell(timeout_s=10)\n"
    "ws = sh.reset_workspace()\n"
    "assert sh.run('echo hi > f; cat f').output.strip() == 'hi'\n"
    "for how in ('exit', 'collect'):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        if how == 'collect':\n"
    "            del sh\n"
    "            gc.collect()\n"
    "        sys.exit(0)\n"
    "    assert os.waitpid(pid, 0)[1] == 0\n"
    "    r = sh.run('cat f')\n"
    "    print(how, os.path.isdir(ws), repr(r.output), flush=True)\n"
    "sh.close()\n"
)


def test_a_forked_child_exiting_normally_leaves_the_parents_workspace_alone():
    # Regression: the child ran the inherited Shell's finalizer at exit (or on collection)
    # and removed the parent's workspace.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", FORK_AND_EXIT], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0 and proc.stdout == "exit True 'hi\\n'\ncollect True 'hi\\n'\n", (
        f"the parent's Shell broke after a forked child exited: rc={proc.returncode}\n"
        f"stdout: {proc.stdout}\nstderr: {proc.stderr[-2000:]}")


_HOLD = ("python3 -c 'import time; x = bytearray(150 << 20); print(\"held\", flush=True); time.sleep(3); "
         "print(\"kept\", flush=True)'")
_PIN = (
    "python3 -c 'import ctypes\nlibc = ctypes.CDLL(None)\nlibc.shmat.restype = ctypes.c_void_p\n"
    "sid = libc.shmget(0, ctypes.c_size_t(60 << 20), 0o1600)\naddr = libc.shmat(sid, None, 0)\n"
    "assert addr not in (None, 2**64 - 1)\nctypes.memset(addr, 1, 60 << 20)\nprint(\"pinned\", flush=True)'"
)


def _memory_shell() -> Shell:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReducedIsolationWarning)
        sh = Shell(timeout_s=30, memory_mb=256)
    if sh.memory_scope != "command":
        sh.close()
        pytest.skip("no memory cgroup can be made here: memory_mb bounds each process alone")
    sh.reset_workspace()
    return sh


@pytest.mark.timeout(120)
def test_memory_mb_bounds_all_processes_of_a_command_together():
    """Regression (hostile output, part 2): with memory_mb=256 a command held 1,027 MiB
    across 5 processes (RLIMIT_AS is per process).

    The five start together and each keeps its 150 MiB for 3 s: two that both print "kept"
    held 300 MiB at once. ("held" alone may show twice: the OOM killer can take the first
    holder, the largest, so that a later one gets its memory.)"""
    with _memory_shell() as sh:
        result = sh.run(f"for i in 1 2 3 4 5; do {_HOLD} & done; wait; echo done")
        lines = result.output.splitlines()
        assert lines.count("kept") <= 1 and lines.count("held") < 5, result.output[-500:]
        assert result.output.endswith("done\n")
        assert sh.run("echo next").output == "next\n"  # the shell goes on


@pytest.mark.timeout(120)
def test_shared_memory_left_by_a_command_counts_against_memory_mb():
    """Regression: SysV segments that outlive their process pinned 360 MiB with memory_mb=256."""
    with _memory_shell() as sh:
        result = sh.run(f"for i in 1 2 3 4 5 6; do {_PIN}; done; echo done")
        assert result.output.splitlines().count("pinned") <= 4, result.output[-500:]
        assert sh.run(f"{_PIN}").output.splitlines() == ["pinned"]  # freed with the last command
