"""Functional tests of `gem_core.sandbox.Sandbox`: results, limits, concurrency, lifecycle."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings

import pytest

from gem_core.errors import InvalidArgument, SandboxClosed, SandboxError
from gem_core.sandbox import ExecResult, ReducedIsolationWarning, Sandbox, isolation, pool

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(size=2, timeout_s=5, max_output_bytes=1000) as sb:
        yield sb


def test_stdout_stderr_and_exit_codes(sandbox):
    ok = sandbox.run("print('hello'); import sys; print('warn', file=sys.stderr)")
    assert isinstance(ok, ExecResult)
    assert (ok.stdout, ok.stderr, ok.exit_code, ok.timed_out, ok.truncated) == ("hello\n", "warn\n", 0, False, False)
    assert ok.ok and ok.duration_s > 0
    assert sandbox.run("raise SystemExit(3)").exit_code == 3
    assert sandbox.run("import sys; sys.exit()").exit_code == 0
    assert sandbox.run("import os; os._exit(7)").exit_code == 7


def test_exception_traceback_shows_user_code_only(sandbox):
    result = sandbox.run("x = 1\n1 / 0")
    assert result.exit_code == 1 and not result.ok
    assert result.stderr.startswith("Traceback (most recent call last):\n  File \"<code>\", line 2")
    assert result.stderr.endswith("ZeroDivisionError: division by zero\n")
    assert "_server" not in result.stderr
    syntax = sandbox.run("def f(:")
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


def test_stdin(sandbox):
    assert sandbox.run("import sys; print(sys.stdin.read().upper())", stdin="abc\ndef").stdout == "ABC\nDEF\n"
    big = "y" * 300_000  # more than a pipe buffer
    assert sandbox.run("import sys; print(len(sys.stdin.read()))", stdin=big).stdout == "300000\n"
    assert sandbox.run("print(input('?'))", stdin=None).stderr.endswith("EOFError: EOF when reading a line\n")


def test_truncation_keeps_head_and_tail(sandbox):
    result = sandbox.run("print('A' * 600 + 'B' * 600 + 'C' * 600, end='')")
    assert result.truncated
    assert result.stdout == "A" * 500 + "\n... [800 bytes truncated] ...\n" + "C" * 500


def test_timeout_kills_only_the_execution(sandbox):
    start = time.monotonic()
    result = sandbox.run("import time; time.sleep(60)", timeout=0.5)
    assert result.timed_out and result.exit_code == -9
    # Quiet: 0.5 s + 0.01 s. Under 0.5 s + the pool's 2 s backstop (_GRACE_S), which would
    # report a sandbox_error rather than this run's own timeout.
    assert time.monotonic() - start < 2.0
    assert sandbox.run("print(1 + 1)").stdout == "2\n"


def test_each_run_is_fresh(sandbox):
    for _ in range(3):
        result = sandbox.run("import os, random, numpy\nprint(os.getcwd(), os.listdir('.'), globals().get('z'))\nz = 1")
        assert result.stdout.endswith("[] None\n"), result
    draws = {sandbox.run("import random; print(random.random())").stdout for _ in range(4)}
    assert len(draws) == 4  # forked children are reseeded
    draws = {sandbox.run("import numpy; print(numpy.random.rand())").stdout for _ in range(4)}
    assert len(draws) == 4  # numpy's global state too


@pytest.mark.parametrize("isolation", ["auto", "rlimits"])
def test_a_run_is_the_oom_killers_first_choice(isolation):
    # Set by the zygote for its child (or by the child itself where the zygote may not).
    with Sandbox(size=1, isolation=isolation) as sb:
        for _ in range(2):
            assert sb.run("print(open('/proc/self/oom_score_adj').read().strip())").stdout == "1000\n"


def test_phase_times_say_where_the_runs_went(sandbox):
    before = {k: len(v) for k, v in sandbox.phase_times().items()}
    for _ in range(3):
        sandbox.run("print(1)")
    sandbox.run("print(1)")  # its slot's cleanup is read back before this run
    phases = sandbox.phase_times()
    for name in ("slot_wait", "transport", "spare_wait", "child", "finish",
                 "cleanup_reap", "cleanup_files", "cleanup_ipc", "cleanup_fork"):
        new = phases[name][before.get(name, 0):]
        assert new and all(0 <= t < 30 for t in new), (name, new)
    assert len(phases["child"]) - before.get("child", 0) == 4
    # The phases of a run add up to no more than the run's duration.
    result = sandbox.run("import time; time.sleep(0.2)")
    phases = sandbox.phase_times()
    assert 0.19 <= phases["child"][-1] <= result.duration_s


def test_prelude_replays_state_silently(sandbox):
    result = sandbox.run("print(x + y)", prelude=["x = 40\nprint('noise')", "1 / 0", "y = 2"])
    assert (result.stdout, result.stderr) == ("42\n", "")


def test_concurrent_threads(sandbox):
    results: dict[int, str] = {}

    def work(i: int) -> None:
        results[i] = sandbox.run(f"print({i} * 2)").stdout

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"{i * 2}\n" for i in range(8)}


def test_asyncio(sandbox):
    async def main():
        return await asyncio.gather(*(sandbox.arun(f"print({i})") for i in range(6)))

    assert [r.stdout for r in asyncio.run(main())] == [f"{i}\n" for i in range(6)]


def test_dead_worker_is_replaced(sandbox):
    sandbox.warm_up()
    for worker in sandbox._workers:
        worker.proc.kill()  # the zygote dies between runs
        worker.proc.wait()
    for _ in range(sandbox.size + 1):
        assert sandbox.run("print('back')").stdout == "back\n"


def test_worker_dying_mid_run_is_reported_and_replaced(sandbox):
    sandbox.warm_up()
    victim = sandbox._workers[0]
    threading.Timer(0.3, victim.proc.kill).start()
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(sandbox.run("import time; time.sleep(2)")))
               for _ in range(sandbox.size)]  # every slot busy when the victim dies
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [r for r in results if r.sandbox_error]
    assert len(failed) == 1 and failed[0].exit_code == -1
    assert "died during the execution; it was replaced" in failed[0].stderr
    assert all(sandbox.run("print(3)").stdout == "3\n" for _ in range(sandbox.size + 1))


def test_close_twice_and_use_after_close():
    sb = Sandbox(size=1)
    assert sb.run("print(1)").stdout == "1\n"
    sb.close()
    sb.close()
    assert sb.closed
    with pytest.raises(SandboxClosed, match="closed; create a new one"):
        sb.run("print(1)")


def test_invalid_arguments():
    with pytest.raises(InvalidArgument, match=r"Sandbox\(size=...\) must be positive, got 0"):
        Sandbox(size=0)
    with pytest.raises(InvalidArgument, match="expects 'auto', 'bwrap', 'netns' or 'rlimits', got 'docker'"):
        Sandbox(isolation="docker")  # type: ignore[arg-type]
    with Sandbox(size=1) as sb, pytest.raises(InvalidArgument, match="expects a str of Python source, got int"):
        sb.run(3)  # type: ignore[arg-type]


def test_rlimits_level_runs_and_scrubs_env(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_TEST_SECRET", "leak")
    with Sandbox(size=1, isolation="rlimits") as sb:
        assert sb.isolation == "rlimits"
        result = sb.run("import os; print(os.environ.get('GEM_SANDBOX_TEST_SECRET'), os.getcwd() == os.environ['HOME'])")
        assert result.stdout == "None True\n"
        assert sb.run("import time; time.sleep(30)", timeout=0.5).timed_out
        assert sb.run("print(2)").stdout == "2\n"


def test_reduced_isolation_warns_once(monkeypatch):
    monkeypatch.setattr(isolation, "detect_isolation",
                        lambda: ("rlimits", {"bwrap": "not installed", "netns": "not permitted"}))
    monkeypatch.setattr(isolation, "_WARNED", set())
    with pytest.warns(ReducedIsolationWarning, match="bubblewrap is unavailable .*apt-get install bubblewrap"):
        first = Sandbox(size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = Sandbox(size=1)
    assert first.isolation == second.isolation == "rlimits"
    first.close()
    second.close()


def test_a_forked_child_can_start_its_own_sandbox(sandbox):
    # Regression: a child forked after the parent had started workers inherited the
    # spawner thread pool without its thread, and hung on its first run.
    import os

    assert sandbox.run("print(1)").stdout.strip() == "1"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: a fresh pool must work
        os.close(read_fd)
        try:
            with Sandbox(size=1) as child:
                out = child.run("print(2)", timeout=20).stdout.strip()
        except BaseException as e:  # report anything to the parent
            out = f"error: {e!r}"
        os.write(write_fd, out.encode())
        os._exit(0)
    os.close(write_fd)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung starting its sandbox")
    with os.fdopen(read_fd) as f:
        assert f.read() == "2"
    assert sandbox.run("print(3)").stdout.strip() == "3"


# ----------------------------------------------------------------------------- cleanup between runs

DEEP_TREE = (
    "import os, sys\n"
    "for top in ['.'] + sys.argv[1:]:\n"
    "    if not os.access(top, os.W_OK):\n"
    "        continue\n"
    "    os.chdir(top)\n"
    "    os.makedirs('deep', exist_ok=True)\n"
    "    os.chdir('deep')\n"
    "    for _ in range(2000):  # deeper than the recursion limit, and paths past PATH_MAX\n"
    "        os.mkdir('d' * 8)\n"
    "        os.chdir('d' * 8)\n"
    "    open('leaf', 'w').write('x')\n"
    "print('built')\n"
)


@pytest.mark.parametrize("isolation", ["auto", "rlimits"])
def test_a_deep_tree_left_by_one_run_does_not_break_the_next(isolation):
    # Regression: shutil.rmtree raised RecursionError in the zygote's cleanup, outside its
    # try: the worker died and the next, correct run got a sandbox_error.
    with Sandbox(size=1, isolation=isolation, timeout_s=20) as sb:
        # Only bubblewrap's /tmp and /dev/shm are private (the other levels use the host's).
        tops = ["/tmp", "/dev/shm"] if sb.isolation == "bwrap" else []
        assert sb.run(f"import sys; sys.argv[1:] = {tops!r}\n" + DEEP_TREE).stdout == "built\n"
        second = sb.run("print(1 + 1)")
        assert second.ok and second.stdout == "2\n", second
        third = sb.run(
            f"import os\nhere = os.getcwd()\ndirs = [os.path.dirname(here)] + {tops!r}\n"
            "print([n for d in dirs if os.path.isdir(d) for n in os.listdir(d)"
            " if n == 'deep' or (n.startswith('run-') and n != os.path.basename(here))])")
        assert third.stdout == "[]\n", third  # the trees are gone, and so are old work dirs


MANY_DIRS = (
    "import os, time\n"
    "start, n = time.monotonic(), 0\n"
    "while time.monotonic() - start < 4:\n"
    "    os.mkdir(f'd{n}')\n"
    "    n += 1\n"
    "print(n)\n"
)


@pytest.mark.parametrize("isolation", ["auto", "rlimits"])
def test_a_run_that_leaves_a_huge_tree_does_not_stall_the_next(isolation):
    # Regression: a run that spent its time making directories (hundreds of thousands)
    # held its slot while the zygote removed them, ~4x as long as making them took; the
    # next run (the next episode's correct submission) waited for all of it. Now cleanup
    # has a budget (CLEANUP_BUDGET_S); past it the zygote is replaced and the tree goes
    # with its mount namespace, or in the background.
    with Sandbox(size=1, isolation=isolation, timeout_s=20) as sb:
        made = sb.run(MANY_DIRS)
        assert made.ok and int(made.stdout) > 1000, made
        start = time.monotonic()
        second = sb.run(
            "import os\nhere = os.getcwd()\n"
            "print(sum(1 for n in os.listdir(os.path.dirname(here)) if n.startswith('run-')),"
            " sum(1 for n in os.listdir('/tmp') if n[:1] == 'd' and n[1:].isdigit()))")
        waited = time.monotonic() - start
        assert second.ok and second.stdout == "1 0\n", second  # only its own work dir
        # Making the tree took 4 s; removing it inline took 1.4-4x that (rlimits, bwrap);
        # the next run now waits ~0.5 s (the budget plus a zygote restart), 8x under 4 s.
        assert waited < made.duration_s, (waited, made.duration_s)
        assert sb.run("print(3)").stdout == "3\n"


def test_a_slow_cleanup_does_not_eat_the_next_runs_deadline(monkeypatch):
    # A cleanup that takes seconds must not count against the next run's timeout: the
    # run's deadline starts when its worker is ready, not when the host hands out the slot.
    marker = "    def after(self, workdir):\n"
    assert marker in pool._SERVER_SOURCE
    slow = pool._SERVER_SOURCE.replace(marker, marker + "        time.sleep(3.5)\n", 1)
    monkeypatch.setattr(pool, "_SERVER_SOURCE", slow)
    with Sandbox(size=1, timeout_s=5) as sb:
        assert sb.run("print(1)").stdout == "1\n"
        second = sb.run("print(2)", timeout=0.5)
        assert second.ok and second.stdout == "2\n", second
        assert second.duration_s < 1.5, second


@pytest.mark.parametrize(
    "frame",
    ["b'[' * 100_000", "json.dumps({'stdout': ['x'], 'exit_code': 'zero'}).encode()"],
    ids=["nested-100k", "wrong-types"],
)
def test_a_malformed_worker_reply_is_a_sandbox_error_not_an_exception(monkeypatch, frame):
    # The host parses what a zygote (inside the sandbox) sends it like any hostile text.
    marker = "            _write_frame(self.proto_out, reply)  # answer first, tidy up while the host works"
    assert marker in pool._SERVER_SOURCE
    broken = pool._SERVER_SOURCE.replace(
        marker, f"            _data = {frame}; os.write(self.proto_out, _HEADER.pack(len(_data)) + _data)", 1)
    monkeypatch.setattr(pool, "_SERVER_SOURCE", broken)
    with Sandbox(size=1, timeout_s=5) as sb:
        result = sb.run("print(1)")
        assert result.sandbox_error and "it was replaced" in result.sandbox_error, result
        assert not result.ok


# A child forked from a process holding started pools, that then exits the normal way
# (atexit and weakref finalizers run), or drops its reference to the pool.
FORK_AND_EXIT = (
    "import gc, os, sys\n"
    "from gem_core.sandbox import Sandbox\n"
    "sb = Sandbox(size=1, timeout_s=20)\n"
    "assert sb.run('print(1)').stdout == '1\\n'\n"
    "for how in ('exit', 'collect'):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        if how == 'collect':\n"
    "            del sb\n"
    "            gc.collect()\n"
    "        sys.exit(0)\n"
    "    assert os.waitpid(pid, 0)[1] == 0\n"
    "    r = sb.run('print(2)')\n"
    "    print(how, repr(r.stdout), r.sandbox_error, flush=True)\n"
    "sb.close()\n"
)


def test_a_forked_child_exiting_normally_leaves_the_parents_pool_alone():
    # Regression: the child ran the inherited pool's exit cleanup (atexit / finalizer),
    # killed the parent's zygotes and removed their cgroups and base dir; every later run
    # of the parent raised FileNotFoundError.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", FORK_AND_EXIT], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0 and proc.stdout == "exit '2\\n' None\ncollect '2\\n' None\n", (
        f"the parent's pool broke after a forked child exited: rc={proc.returncode}\n"
        f"stdout: {proc.stdout}\nstderr: {proc.stderr[-2000:]}")


def test_an_inherited_pool_refuses_to_run_in_a_forked_child(sandbox):
    # Its pipes lead to the parent's zygotes: a run from the child would interleave frames
    # with the parent's. It says what to do instead.
    import os

    assert sandbox.run("print(1)").stdout == "1\n"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            sandbox.run("print(2)")
            out = "ran"
        except SandboxError as e:
            out = f"{type(e).__name__}: {e}"
        except BaseException as e:  # noqa: BLE001 - report anything to the parent
            out = f"unexpected {e!r}"
        os.write(write_fd, out.encode())
        os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    with os.fdopen(read_fd) as f:
        out = f.read()
    assert out.startswith("SandboxError: ") and "create a new Sandbox" in out, out
    assert sandbox.run("print(3)").stdout == "3\n"


def test_runs_inherit_a_frozen_heap_and_numpy_random(sandbox):
    # A cyclic collection in a run child walked (so copied) the zygote's whole preloaded
    # heap; numpy 2 imports numpy.random lazily (~15 ms in every run that touched it).
    result = sandbox.run(
        "import gc, importlib.util, sys\n"
        "print(gc.get_freeze_count() > 1000, importlib.util.find_spec('numpy') is None"
        " or 'numpy.random' in sys.modules)")
    assert result.stdout == "True True\n", f"expected a frozen heap and numpy.random preloaded, got {result}"


def test_a_forked_process_of_the_code_does_not_report_the_runs_exit_code(sandbox):
    # The run's child reports its exit code to the zygote before its exit's teardown; a
    # process the code forks that ends the same way must not speak for the run.
    result = sandbox.run(
        "import os, sys\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    raise KeyError('kid')\n"
        "os.waitpid(pid, 0)\n"
        "print('parent done')\n"
        "sys.exit(4)\n")
    assert (result.exit_code, result.stdout) == (4, "parent done\n"), result
    assert "KeyError: 'kid'" in result.stderr, result
