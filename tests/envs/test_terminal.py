"""Terminal task envs: every shipped task is solvable and not trivially passed, the shell
is bounded and grading cannot be tampered with."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gem_core.envs.terminal import FORMAT_HINT, TerminalEnv, load_task, parse_action, task_names
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.registration import registry
from gem_core.sandbox import detect_isolation

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::gem_core.sandbox.ReducedIsolationWarning"),
]

ISOLATION, WHY_NOT = detect_isolation()
requires_bwrap = pytest.mark.skipif(
    ISOLATION != "bwrap",
    reason=f"bubblewrap does not work here ({WHY_NOT.get('bwrap', 'unknown')}): sandbox "
           "isolation of the terminal env cannot be tested (apt-get install bubblewrap)",
)
TASKS = task_names()


def make_env(task: str | None = "count-lines", **kwargs) -> TerminalEnv:
    return TerminalEnv(task, **kwargs)


# ----------------------------------------------------------------------------- tasks

# Look-alikes an agent could leave in the workspace instead of solving the task: Python
# modules that a test's `python3 -` would import from its working directory before the
# standard library, each printing PASS and exiting 0.
_DECOY_MODULES = ("json", "csv", "re", "io", "collections", "pathlib", "subprocess", "decimal",
                  "statistics", "tarfile", "sitecustomize", "usercustomize")
PLANT_DECOYS = (
    "for m in " + " ".join(_DECOY_MODULES) + "; do "
    "printf 'import sys\\nprint(\"PASS\")\\nsys.exit(0)\\n' > \"$m.py\"; done"
)


def _solve_and_noop(name: str) -> dict:
    """Reference solution then <finish>; a fresh episode (from the cached setup) likewise;
    and an episode that finishes at once."""
    task = load_task(name)
    if task.missing_tools():
        return {"skip": f"{name} needs {task.missing_tools()} on the sandbox PATH"}
    env = make_env(name)
    try:
        out = {"solved": []}
        for seed in (0, 1):  # the second episode starts from the setup snapshot
            env.reset(seed=seed)
            _, _, _, _, info = env.step(f"<bash>{task.solution}</bash>")
            obs, reward, terminated, truncated, final = env.step("<finish></finish>")
            out["solved"].append((info["exit_code"], reward, terminated, truncated,
                                  final["success"], final["test_output"], obs))
        env.reset(seed=2)
        _, reward, terminated, _, final = env.step("<finish>")
        out["noop"] = (reward, terminated, final["success"], final["test_output"])
        env.reset(seed=3)
        _, _, _, _, info = env.step(f"<bash>{PLANT_DECOYS}</bash>")
        _, reward, terminated, _, final = env.step("<finish>")
        out["decoys"] = (info["exit_code"], reward, final["success"], final["test_output"])
        return out
    finally:
        env.close()


@pytest.fixture(scope="module")
def task_runs() -> dict[str, dict]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(TASKS, pool.map(_solve_and_noop, TASKS), strict=True))


def test_at_least_twelve_tasks_each_registered():
    assert len(TASKS) >= 12
    for name in TASKS:
        task = load_task(name)
        assert task.instruction and task.setup and task.test and task.solution, name
        spec = registry[f"terminal:{name}-v0"]
        assert spec.offline is True and spec.kwargs["task"] == name
    assert registry["terminal:Mixed-v0"].kwargs["task"] is None


@pytest.mark.parametrize("name", TASKS)
def test_reference_solution_passes_and_noop_fails(task_runs, name):
    run = task_runs[name]
    if "skip" in run:
        pytest.skip(run["skip"])
    for exit_code, reward, terminated, truncated, success, test_output, obs in run["solved"]:
        assert exit_code == 0
        assert (reward, terminated, truncated, success) == (1.0, True, False, True), test_output
        assert test_output.strip().endswith("PASS")
        assert obs == "Finished. The task's tests passed."
    reward, terminated, success, test_output = run["noop"]
    assert (reward, terminated, success) == (0.0, True, False)
    assert "FAIL" in test_output or "Error" in test_output, test_output


@pytest.mark.parametrize("name", TASKS)
def test_planted_look_alike_modules_do_not_pass_the_tests(task_runs, name):
    """Regression: json-edit's test ran `python3 -` in the workspace, so a planted json.py
    that printed PASS and exited 0 made it pass without touching config.json."""
    run = task_runs[name]
    if "skip" in run:
        pytest.skip(run["skip"])
    exit_code, reward, success, test_output = run["decoys"]
    assert exit_code == 0
    assert (reward, success) == (0.0, False), test_output


# check_env on every terminal:* id is tests/test_checker.py::test_check_env_all_registered.


# ----------------------------------------------------------------------------- actions


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<bash>ls -la</bash>", ("bash", "ls -la")),
        ("I will look first.\n<bash>\ncat a.txt\n</bash>\nthen more", ("bash", "cat a.txt")),
        ("<bash>echo 1</bash><bash>echo 2</bash>", ("bash", "echo 1")),
        ("<finish>", ("finish", "")),
        ("<finish/>", ("finish", "")),
        ("<finish>all done</finish>", ("finish", "")),
        ("<finish></finish><bash>rm -rf .</bash>", ("finish", "")),
        ("<bash>ls</bash> <finish>", ("bash", "ls")),
        ("<finished>", (None, "no <bash>...</bash> or <finish></finish> found")),
        ("ls -la", (None, "no <bash>...</bash> or <finish></finish> found")),
        ("<bash>ls", (None, "the <bash> tag is not closed with </bash>")),
        ("<bash>  \n </bash>", (None, "the <bash></bash> block is empty")),
        ("<bash>echo \x00</bash>", (None, "the command contains a NUL character")),
        (None, (None, "the action must be text, got NoneType")),
        (["<finish>"], (None, "the action must be text, got list")),
    ],
)
def test_parse_action(action, expected):
    assert parse_action(action) == expected


def test_format_errors_pay_the_penalty_and_the_episode_goes_on():
    env = make_env(max_turns=10)
    try:
        env.reset(seed=0)
        bad = ["", "just talking", "<bash></bash>", "<bash>ls", None, 12, "<bash>" + "x" * 20_000 + "</bash>",
               "\ud800 <bash>\x00</bash>"]
        for i, action in enumerate(bad, start=1):
            obs, reward, terminated, truncated, info = env.step(action)
            assert obs.startswith("Format error: ") and obs.endswith(FORMAT_HINT), obs
            assert reward == pytest.approx(-0.1)
            assert (terminated, truncated) == (False, False)
            assert info["format_error"] and info["invalid_action"] and info["turn"] == i
            assert info["success"] is False and "parsed_action" not in info
        obs, reward, _, _, info = env.step("<bash>echo fine</bash>")
        assert (obs, reward, info["format_error"]) == ("fine\n[exit code: 0]", 0.0, False)
        assert "at most 16384 are allowed" in env.step("<bash>" + "x" * 20_000 + "</bash>")[0]
    finally:
        env.close()


def test_observation_of_a_command():
    env = make_env()
    try:
        obs, info = env.reset(seed=0)
        assert obs.startswith(load_task("count-lines").instruction)
        assert "You have 20 turns" in obs and FORMAT_HINT in obs
        assert "`cd`, variables and background jobs do not carry over" in obs
        assert info == {"task": "count-lines", "turn": 0, "success": False, "isolation": ISOLATION}
        obs, reward, terminated, truncated, info = env.step("<bash>ls data | head -n 3; exit 4</bash>")
        assert obs == "part1.txt\npart2.txt\npart3.txt\n[exit code: 4]"
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["exit_code"] == 4 and info["parsed_action"] == "ls data | head -n 3; exit 4"
        assert info["timed_out"] is False and info["output_truncated"] is False
        obs, *_ = env.step("<bash>true</bash>")
        assert obs == "(no output)\n[exit code: 0]"
    finally:
        env.close()


def test_output_flood_is_bounded_with_a_note():
    env = make_env(max_output_bytes=2048)
    try:
        env.reset(seed=0)
        obs, _, _, _, info = env.step("<bash>yes flood | head -c 1000000</bash>")
        assert info["output_truncated"] is True
        assert len(obs) < 2048 + 300
        assert obs.endswith("[output cut: 1000000 bytes written, the first and last 1024 shown]\n[exit code: 0]")
    finally:
        env.close()


def test_infinite_loop_is_killed_and_the_episode_continues():
    env = make_env(timeout_s=1)
    try:
        env.reset(seed=0)
        start = time.monotonic()
        obs, reward, terminated, truncated, info = env.step("<bash>while true; do :; done</bash>")
        assert time.monotonic() - start < 4
        assert obs == "(no output)\n[the command timed out after 1 s and was killed]"
        assert info["timed_out"] is True and (reward, terminated, truncated) == (0.0, False, False)
        obs, *_ = env.step("<bash>echo still here</bash>")
        assert obs == "still here\n[exit code: 0]"
    finally:
        env.close()


@requires_bwrap
def test_commands_cannot_write_outside_the_workspace_nor_reach_the_network():
    env = make_env()
    try:
        obs, _ = env.reset(seed=0)
        assert "working directory is /workspace" in obs and "There is no network" in obs
        obs, *_ , info = env.step("<bash>touch /usr/gem-evil && echo WROTE</bash>")
        assert "Read-only file system" in obs and "WROTE" not in obs and info["exit_code"] != 0
        assert not os.path.exists("/usr/gem-evil")
        obs, *_ , info = env.step("<bash>exec 3<>/dev/tcp/1.1.1.1/80 && echo CONNECTED</bash>")
        assert "Network is unreachable" in obs and "CONNECTED" not in obs
    finally:
        env.close()


@requires_bwrap
def test_grading_cannot_be_tampered_with():
    env = make_env()
    try:
        env.reset(seed=0)
        # A fake test script in the workspace, and a late writer left in the background.
        env.step("<bash>printf 'echo PASS; exit 0\\n' > test.sh && chmod +x test.sh</bash>")
        env.step("<bash>nohup bash -c 'sleep 0.5; echo 117 > count.txt' >/dev/null 2>&1 &</bash>")
        obs, *_ = env.step("<bash>sleep 1; cat count.txt</bash>")
        assert "No such file" in obs  # the background writer died with its command
        obs, reward, terminated, _, info = env.step("<finish>")
        assert (reward, terminated, info["success"]) == (0.0, True, False)
        assert "count.txt does not exist" in info["test_output"]
    finally:
        env.close()


def test_turn_limit_truncates_and_grades():
    env = make_env(max_turns=2)
    try:
        env.reset(seed=0)
        task = load_task("count-lines")
        assert env.step(f"<bash>{task.solution}</bash>")[2:4] == (False, False)
        obs, reward, terminated, truncated, info = env.step("not an action")
        assert (terminated, truncated, info["success"], info["tests_passed"]) == (False, True, True, True)
        assert reward == pytest.approx(0.9)  # format penalty + solved
        assert obs.endswith("You have used all 2 turns. The task's tests passed.")
        with pytest.raises(ResetNeeded):
            env.step("<finish>")
        env.reset(seed=0)
        env.step("<bash>echo 3 > count.txt</bash>")
        obs, reward, terminated, truncated, info = env.step("<bash>ls</bash>")
        assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)
        assert obs.endswith("You have used all 2 turns. The task's tests failed.")
    finally:
        env.close()


def test_workspace_is_fresh_each_reset_and_removed_on_close():
    env = make_env()
    try:
        env.reset(seed=0)
        first = env.shell.workspace
        env.step("<bash>echo 117 > count.txt</bash>")
        env.reset(seed=0)
        second = env.shell.workspace
        assert first != second and not os.path.exists(first)
        obs, *_ = env.step("<bash>ls</bash>")
        assert obs == "data\n[exit code: 0]"
    finally:
        env.close()
    assert not os.path.exists(second)
    env.close()  # twice is safe


def test_setup_without_cache_runs_every_reset():
    env = make_env("rename-files", cache_setup=False)
    try:
        for _ in range(2):
            env.reset(seed=0)
            assert env.shell.snapshots == ()
            obs, *_ = env.step("<bash>ls photos | wc -l</bash>")
            assert obs == "10\n[exit code: 0]"
    finally:
        env.close()


def test_mixed_env_samples_tasks_by_seed():
    env = make_env(None)
    try:
        picks = [env.reset(seed=seed)[1]["task"] for seed in range(6)]
        assert picks == [env.reset(seed=seed)[1]["task"] for seed in range(6)]
        assert len(set(picks)) > 1 and set(picks) <= set(TASKS)
        assert env.reset(options={"task": "sort-dedup"})[1]["task"] == "sort-dedup"
        with pytest.raises(InvalidArgument, match=r"reset\(options=\{'task': 'nope'\}\): this env's tasks are"):
            env.reset(options={"task": "nope"})
    finally:
        env.close()


def test_unknown_task_and_bad_arguments():
    with pytest.raises(InvalidArgument, match="unknown terminal task 'count-line'.*Did you mean 'count-lines'"):
        TerminalEnv("count-line")
    with pytest.raises(InvalidArgument, match="max_turns=...\\) must be a positive int, got 0"):
        TerminalEnv("count-lines", max_turns=0)
    with pytest.raises(InvalidArgument, match="needs at least one task"):
        TerminalEnv([])
    env = TerminalEnv("count-lines")
    with pytest.raises(ResetNeeded, match="call reset"):
        env.step("<finish>")


def test_a_task_directory_of_ones_own(tmp_path):
    task = tmp_path / "greet"
    task.mkdir()
    (task / "instruction.md").write_text("Write hello to greeting.txt.\n")
    (task / "setup.sh").write_text("echo draft > greeting.txt\n")
    (task / "test.sh").write_text('[ "$(cat greeting.txt)" = hello ] || { echo "FAIL: got $(cat greeting.txt)"; exit 1; }\n')
    env = make_env(str(task))
    try:
        obs, info = env.reset(seed=0)
        assert obs.startswith("Write hello to greeting.txt.") and info["task"] == "greet"
        env.step("<bash>echo hello > greeting.txt</bash>")
        assert env.step("<finish>")[1] == 1.0
        env.reset(seed=0)
        _, reward, _, _, info = env.step("<finish>")
        assert reward == 0.0 and info["test_output"] == "FAIL: got draft\n"
    finally:
        env.close()
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidArgument, match="has no instruction.md; a task directory holds"):
        TerminalEnv(str(tmp_path / "empty"))


def test_grading_works_with_reduced_isolation():
    """Without bubblewrap the tests run on a copy of the workspace (readable by the command's uid)."""
    env = make_env("fix-permissions", isolation="rlimits")
    try:
        obs, info = env.reset(seed=0)
        assert info["isolation"] == "rlimits" and "/workspace" not in obs
        env.step(f"<bash>{load_task('fix-permissions').solution}</bash>")
        _, reward, _, _, info = env.step("<finish>")
        assert reward == 1.0, info["test_output"]
        env.reset(seed=0)
        assert env.step("<finish>")[1] == 0.0
    finally:
        env.close()


def test_filling_the_workspace_ends_the_episode_and_deletes_it():
    env = make_env(max_workspace_mb=8, max_workspace_files=40, timeout_s=10)
    try:
        env.reset(seed=0)
        obs, reward, terminated, _, info = env.step("<bash>ls</bash>")
        assert info["workspace_over_limit"] is False and 0 < info["workspace_bytes"] < 8 * 1024 * 1024
        workspace = env.shell.workspace
        start = time.monotonic()
        obs, reward, terminated, truncated, info = env.step(
            "<bash>i=0; while :; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done</bash>")
        assert time.monotonic() - start < 4
        assert (reward, terminated, truncated) == (pytest.approx(-0.1), True, False)
        assert info["workspace_over_limit"] is True and info["success"] is False
        assert info["tests_passed"] is False and info["test_output"] == ""
        assert obs.endswith(
            "[the command was killed: the workspace went over its limit]\n\nThe workspace grew to more "
            "than 8 MiB of disk, over its limit: it has been deleted and the episode is over (the "
            "task's tests did not run).")
        assert not os.path.exists(workspace)
        with pytest.raises(ResetNeeded):
            env.step("<bash>ls</bash>")
        env.reset(seed=0)  # the next episode is unaffected
        obs, _, terminated, _, info = env.step("<bash>ls</bash>")
        assert (obs, terminated, info["workspace_over_limit"]) == ("data\n[exit code: 0]", False, False)
        obs, reward, terminated, _, info = env.step("<bash>touch f{1..40}; echo made</bash>")
        assert obs.startswith("made\n[exit code: 0]\n\nThe workspace grew to more than 40 files and directories")
        assert (reward, terminated, info["success"]) == (pytest.approx(-0.1), True, False)
    finally:
        env.close()
    with pytest.raises(InvalidArgument, match=r"TerminalEnv\(max_workspace_mb=...\) must be positive or None \(no cap\), got -1"):
        TerminalEnv("count-lines", max_workspace_mb=-1)


# ----------------------------------------------------------------------------- the test driver
# Programs of the agent that a task's test runs (python-bugfix's stats.py) run as the agent's
# uid, the test as the grader's: they cannot read the test's expected values nor steer it.

_READ_THE_TEST = r'''
import os, sys
texts = []
for path in [os.path.join(os.environ.get("GEM_TASK_DIR", "/task"), "test.sh"), "/task/test.sh"]:
    try:
        texts.append(open(path).read())
    except OSError as e:
        print("cannot read", path, e, file=sys.stderr)
for pid in filter(str.isdigit, os.listdir("/proc")):  # bash keeps its script open on fd 255
    for what in ("fd/255", "mem"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                texts.append(f.read(1 << 16).decode("latin-1"))
        except OSError:
            pass
values = [line.strip() for line in open(sys.argv[1]) if line.strip()]
for line in "\n".join(texts).splitlines():
    line = line.strip()
    if line.startswith('check "'):
        expected, _, rest = line[7:].partition('"')
        if rest.split() == values:
            print(expected)
            break
else:
    print("mean=0 median=0")
'''

# Attach to the test script's bash and turn the system call it waits in into exit_group(0).
_PTRACE_THE_TEST = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags "
        "rsp ss fs_base gs_base ds es fs gs").split()]
for pid in sorted(map(int, filter(str.isdigit, os.listdir("/proc")))):  # the script, then $(...)
    try:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"test.sh" not in cmdline or pid == os.getpid():
        continue
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        print("attach", pid, os.strerror(ctypes.get_errno()), file=sys.stderr)
        continue
    os.waitpid(pid, 0)
    regs = Regs()
    libc.ptrace(12, pid, None, ctypes.byref(regs))  # PTRACE_GETREGS
    regs.orig_rax, regs.rdi = 231, 0  # the restarted call becomes exit_group(0)
    libc.ptrace(13, pid, None, ctypes.byref(regs))  # PTRACE_SETREGS
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    break
print("mean=0 median=0")
'''


def _plant_stats(program: str) -> str:
    return f"<bash>cat > stats.py <<'PY'\n{program}\nPY\n</bash>"


@requires_bwrap
def test_the_program_under_test_cannot_read_the_test_script():
    """Regression: stats.py ran with the test's uid and printed the expected values it read
    from $GEM_TASK_DIR/test.sh (or the script's fd 255), passing python-bugfix unsolved."""
    env = make_env("python-bugfix")
    try:
        env.reset(seed=0)
        assert env.step(_plant_stats(_READ_THE_TEST))[4]["exit_code"] == 0
        _, reward, terminated, _, info = env.step("<finish>")
        assert (reward, terminated, info["success"]) == (0.0, True, False), info["test_output"]
        assert "Permission denied: '/task/test.sh'" in info["test_output"]
        assert "mean=0 median=0', expected 'mean=2.5 median=2.5'" in info["test_output"]
    finally:
        env.close()


@requires_bwrap
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the ptrace payload is x86-64 code")
def test_the_program_under_test_cannot_ptrace_the_test_script():
    """Regression: stats.py ptraced the test's bash (same uid, no Yama) into exit(0)."""
    env = make_env("python-bugfix")
    try:
        env.reset(seed=0)
        assert env.step(_plant_stats(_PTRACE_THE_TEST))[4]["exit_code"] == 0
        _, reward, _, _, info = env.step("<finish>")
        assert (reward, info["success"]) == (0.0, False), info["test_output"]
        assert "attach" in info["test_output"] and "Operation not permitted" in info["test_output"]
    finally:
        env.close()


def test_a_deep_tree_in_the_workspace_does_not_break_reset_or_close():
    """Regression: a 1,500-level directory tree made reset() and close() raise RecursionError
    (recursive shutil.rmtree) and left the workspace on the host."""
    env = make_env(timeout_s=20)
    try:
        env.reset(seed=0)
        first = env.shell.workspace
        _, _, terminated, _, info = env.step(
            "<bash>python3 -c 'import os\nfor _ in range(1500):\n    os.mkdir(\"dddd\"); os.chdir(\"dddd\")'"
            " && chmod 000 dddd</bash>")
        assert info["exit_code"] == 0 and not terminated and not info["workspace_over_limit"]
        env.reset(seed=0)
        assert not os.path.exists(first)
        second = env.shell.workspace
        env.step("<bash>python3 -c 'import os\nfor _ in range(1500):\n    os.mkdir(\"dddd\"); os.chdir(\"dddd\")'</bash>")
    finally:
        env.close()
    assert not os.path.exists(second) and not os.path.exists(os.path.dirname(second))


def test_writing_below_a_very_long_path_still_hits_the_workspace_cap():
    """Regression: files below a path longer than 4,096 bytes were skipped by the disk-usage
    walk (ENAMETOOLONG counted as empty): 382 MiB written against a 256 MiB cap."""
    env = make_env(max_workspace_mb=8, timeout_s=20)
    try:
        env.reset(seed=0)
        workspace = env.shell.workspace
        obs, reward, terminated, _, info = env.step(
            "<bash>python3 -c 'import os\nfor _ in range(30):\n    os.mkdir(\"d\" * 200); os.chdir(\"d\" * 200)\n"
            "for i in range(4):\n    open(f\"f{i}\", \"wb\").write(bytes(4 << 20))'</bash>")
        assert info["workspace_over_limit"] is True and terminated, obs
        assert reward == pytest.approx(-0.1) and info["success"] is False
        assert "The workspace grew to more than 8 MiB of disk" in obs
        assert not os.path.exists(workspace)
    finally:
        env.close()
