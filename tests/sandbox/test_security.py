"""Security acceptance suite: hostile code through `PythonCodeTool` is contained and the pool keeps serving."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

import pytest

from gem_core.tools.python import PythonCodeTool

pytestmark = pytest.mark.timeout(60)

TIMEOUT_S = 1.5
HAS_BWRAP = shutil.which("bwrap") is not None
requires_bwrap = pytest.mark.skipif(
    not HAS_BWRAP,
    reason="bubblewrap (bwrap) is not installed: file-system isolation cannot be tested "
           "(apt-get install bubblewrap)",
)
if not HAS_BWRAP:
    print("tests/sandbox/test_security.py: bwrap not found, the file-system isolation tests are skipped")


@pytest.fixture(scope="module")
def tool():
    with PythonCodeTool(timeout_s=TIMEOUT_S, sandbox_options={"size": 2}) as t:
        yield t


def call(tool: PythonCodeTool, code: str):
    result = tool.run(f"<python>\n{code}\n</python>")
    assert result is not None
    return result


def assert_serving(tool: PythonCodeTool) -> None:
    for _ in range(tool.sandbox.size + 1):  # every slot, the replaced one included
        result = call(tool, "print(6 * 7)")
        assert result.observation == "Code execution result: 42\n\n", result
        assert not result.error


def assert_bwrap(tool: PythonCodeTool) -> None:
    assert tool.sandbox.isolation == "bwrap", (
        f"bwrap is installed but the sandbox runs with isolation={tool.sandbox.isolation!r}; "
        "bubblewrap failed to start here (see the ReducedIsolationWarning)")


@requires_bwrap
def test_cannot_read_etc_passwd(tool):
    assert_bwrap(tool)
    result = call(tool, "print(open('/etc/passwd').read())")
    assert "root:" not in result.observation
    assert "FileNotFoundError" in result.observation or "PermissionError" in result.observation
    assert result.error
    assert_serving(tool)


@requires_bwrap
def test_cannot_read_home(tool, tmp_path, monkeypatch):
    assert_bwrap(tool)
    secret = f"home-secret-{uuid.uuid4().hex}"
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    (fake_home / "secret.txt").write_text(secret)
    monkeypatch.setenv("HOME", str(fake_home))
    real_home = Path(os.path.expanduser("~root" if os.geteuid() == 0 else "~"))
    real_secret = real_home / f".gem-sandbox-test-{uuid.uuid4().hex}"
    try:
        real_secret.write_text(secret)
        code = (
            "import os\n"
            f"for path in [{str(fake_home / 'secret.txt')!r}, {str(real_secret)!r}]:\n"
            "    try:\n"
            "        print(open(path).read())\n"
            "    except OSError as e:\n"
            "        print('denied', type(e).__name__)\n"
            f"print(os.listdir(os.path.expanduser('~')))\n"
            f"print(os.path.exists({str(real_home)!r}) and os.listdir({str(real_home)!r}))\n"
        )
        result = call(tool, code)
    finally:
        real_secret.unlink(missing_ok=True)
    assert secret not in result.observation
    assert result.observation.count("denied") == 2, result.observation
    assert real_secret.name not in result.observation
    assert_serving(tool)


@requires_bwrap
def test_cannot_write_outside_workdir(tool, tmp_path):
    assert_bwrap(tool)
    targets = [tmp_path / "pwned.txt", Path(os.path.expanduser("~")) / f"pwned-{uuid.uuid4().hex}",
               Path("/usr/pwned.txt"), Path("/pwned.txt"), Path("/etc/pwned.txt")]
    code = (
        "import os\n"
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        with open(path, 'w') as f: f.write('pwned')\n"
        "        print('wrote', path)\n"
        "    except OSError as e:\n"
        "        print('refused', type(e).__name__)\n"
        "open('mine.txt', 'w').write('ok'); print('workdir', open('mine.txt').read())\n"
    )
    result = call(tool, code)
    for target in targets:
        assert not target.exists(), f"{target} was written from the sandbox"
    assert "workdir ok" in result.observation  # the fresh work dir itself is writable
    assert_serving(tool)


@requires_bwrap
def test_files_do_not_survive_between_runs(tool):
    assert_bwrap(tool)
    for _ in range(tool.sandbox.size):
        call(tool, "open('/tmp/left-behind', 'w').write('x'); open('mine', 'w').write('x')")
    result = call(tool, "import os; print(os.path.exists('/tmp/left-behind'), os.listdir('.'))")
    assert result.observation == "Code execution result: False []\n\n"


def test_no_network(tool):
    if tool.sandbox.isolation == "rlimits":
        pytest.skip("neither bubblewrap nor unshare works here: no network namespace to test")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.3)
    port = listener.getsockname()[1]
    try:
        code = (
            "import socket\n"
            "try:\n"
            f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "    s.sendall(b'exfiltrated'); print('connected')\n"
            "except OSError as e:\n"
            "    print('blocked', type(e).__name__)\n"
        )
        result = call(tool, code)
        with pytest.raises(socket.timeout):
            conn, _ = listener.accept()
            conn.close()
    finally:
        listener.close()
    assert "blocked" in result.observation and "connected" not in result.observation
    assert_serving(tool)


def test_host_environment_is_scrubbed(monkeypatch):
    secret = f"env-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("GEM_TEST_SECRET_TOKEN", secret)
    with PythonCodeTool(timeout_s=TIMEOUT_S, sandbox_options={"size": 1}) as fresh:
        code = (
            "import os\n"
            "print(dict(os.environ))\n"
            "for pid in ('self', '1', str(os.getppid())):\n"
            "    try: print(open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    except OSError as e: print(type(e).__name__)\n"
        )
        result = call(fresh, code)
        assert secret not in result.observation
        assert "GEM_TEST_SECRET_TOKEN" not in result.observation
        assert_serving(fresh)


def test_fork_bomb(tool):
    code = (
        "import os\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        pass\n"
    )
    start = time.monotonic()
    result = call(tool, code)
    # Quiet: TIMEOUT_S + 0.02-0.09 s. The bound stays under TIMEOUT_S + _GRACE_S (2 s), where
    # the pool's own deadline kills a zygote that did not stop the run itself.
    assert time.monotonic() - start < TIMEOUT_S + 1.5
    assert result.error
    assert_serving(tool)


def test_allocate_4gb(tool):
    result = call(tool, "x = bytearray(4 * 1024 ** 3)\nprint('allocated', len(x))")
    assert "MemoryError" in result.observation
    assert "allocated" not in result.observation
    assert_serving(tool)


def test_busy_loop_times_out(tool):
    start = time.monotonic()
    result = call(tool, "while True:\n    pass")
    elapsed = time.monotonic() - start
    assert result.info["timed_out"] and result.error
    assert elapsed <= TIMEOUT_S + 1.5, elapsed  # quiet: TIMEOUT_S + 0.01 s; see test_fork_bomb
    assert "TimeoutError" in result.observation
    assert_serving(tool)


def test_sleep_times_out(tool):
    start = time.monotonic()
    result = call(tool, "import time\nprint('before', flush=True)\ntime.sleep(3600)")
    elapsed = time.monotonic() - start
    assert result.info["timed_out"]
    assert elapsed <= TIMEOUT_S + 1.5, elapsed  # quiet: TIMEOUT_S + 0.01 s; see test_fork_bomb
    assert "before" in result.observation
    assert_serving(tool)


def test_print_100mb_is_truncated_fast(tool, monkeypatch):
    # Quiet: 0.2-0.26 s, too close to the module's 1.5 s limit for a loaded box: this run gets
    # 10 s. A writer stuck on a full pipe (the cap stopped reading) still times out, no 'END'.
    monkeypatch.setattr(tool, "timeout_s", 10.0)
    start = time.monotonic()
    result = call(tool, "import sys\nsys.stdout.write('x' * 100_000_000)\nprint('END')")
    elapsed = time.monotonic() - start
    assert result.info["truncated"] and not result.info["timed_out"]
    assert "bytes truncated] ..." in result.observation
    assert result.observation.rstrip().endswith("END")
    assert len(result.observation) < 70_000
    assert elapsed < 5.0, elapsed  # 20x the quiet figure
    assert_serving(tool)


def test_kill_parent(tool):
    result = call(tool, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('still here')")
    # Either the zygote refused the signal (it runs as another uid) or it died and was replaced.
    assert result.info.get("sandbox_error") or "PermissionError" in result.observation
    assert_serving(tool)


def test_os_exit(tool):
    result = call(tool, "import os\nprint('partial', flush=True)\nos._exit(1)")
    assert result.info["exit_code"] == 1 and result.error
    assert "partial" in result.observation
    assert_serving(tool)


@pytest.mark.parametrize("detach", [False, True], ids=["same-session", "setsid"])
def test_grandchild_holding_the_pipe(tool, detach):
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        + ("    os.setsid()\n" if detach else "")
        + "    while True:\n"
        "        print('grandchild', flush=True)\n"
        "        time.sleep(0.05)\n"
        "print('parent done', flush=True)\n"
    )
    start = time.monotonic()
    result = call(tool, code)
    elapsed = time.monotonic() - start
    assert "parent done" in result.observation
    assert not result.info["timed_out"]
    assert elapsed < TIMEOUT_S, elapsed
    # the grandchild is gone: nothing of it runs in the next execution's namespace
    assert_serving(tool)
    if tool.sandbox.isolation == "bwrap":
        listing = call(tool, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
        pids = eval(listing.observation.removeprefix("Code execution result: "))  # noqa: S307
        assert len(pids) == 3, listing.observation  # bwrap's init, the zygote, this child


IPC_LEAVE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
shm = libc.shmget(0x6e3a11, 32 << 20, 0o1000 | 0o666)   # IPC_CREAT
addr = libc.shmat(shm, None, 0)
ctypes.memset(addr, 7, 32 << 20)                          # 32 MiB pinned in the segment
ctypes.memmove(addr, b"shm-secret", 10)
msg = libc.msgget(0x6e3a12, 0o1000 | 0o666)
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 16)]
sent = libc.msgsnd(msg, ctypes.byref(Msg(1, b"msg-secret")), 16, 0)
sem = libc.semget(0x6e3a13, 1, 0o1000 | 0o666)
mq = libc.mq_open(b"/gem-test-mq", os.O_CREAT | os.O_RDWR, 0o666, None)
print(shm >= 0, addr not in (None, 2 ** 64 - 1), msg >= 0, sent == 0, sem >= 0, mq >= 0)
"""

IPC_LOOK = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found = [libc.shmget(0x6e3a11, 0, 0) >= 0, libc.msgget(0x6e3a12, 0) >= 0,
         libc.semget(0x6e3a13, 0, 0) >= 0, libc.mq_open(b"/gem-test-mq", os.O_RDONLY) >= 0]
left = {}
for kind in ("shm", "msg", "sem"):
    try:
        with open("/proc/sysvipc/" + kind) as f:
            left[kind] = len(f.read().splitlines()) - 1
    except OSError:
        left[kind] = None
print(found, left)
"""


@pytest.mark.parametrize("isolation", ["auto", "netns", "rlimits"])
def test_sysv_ipc_objects_do_not_survive_between_runs(isolation):
    # Regression: --unshare-ipc is per worker and cleanup removed files and processes
    # only, so run 2 read the shared memory, message queue and semaphores run 1 left
    # (and the segment's memory stayed pinned).
    from gem_core.sandbox import Sandbox

    try:
        sb = Sandbox(size=1, isolation=isolation, timeout_s=10)
    except Exception as e:  # noqa: BLE001 - a level this host cannot run
        pytest.skip(f"isolation={isolation!r} does not work here: {e}")
    with sb:
        if sb.isolation == "rlimits" and sb._drop_uid_base is None:
            pytest.skip("runs at the rlimits level share the host's IPC namespace and uid here "
                        "(no uid of their own): their objects cannot be told from the host's")
        first = sb.run(IPC_LEAVE)
        # POSIX queues: mq_open is denied by the seccomp filter where there is one (bwrap).
        from gem_core.sandbox.isolation import seccomp_program

        mq = "False" if sb.isolation == "bwrap" and seccomp_program()[0] is not None else "True"
        assert first.stdout == f"True True True True True {mq}\n", first
        second = sb.run(IPC_LOOK)
        found, left = second.stdout.split("] ")
        assert found.split(", ")[:3] == ["[False", "False", "False"], second
        if sb.isolation == "bwrap":  # a private IPC namespace: nothing at all is left
            assert found.endswith("False"), second  # POSIX queues too (its /dev/mqueue is wiped)
            assert left.strip() == "{'shm': 0, 'msg': 0, 'sem': 0}", second


# ----------------------------------------------------------------------------- a normal install

_INSTALLED_CHILD = r'''
import json, os, sys
import gem_core
from gem_core.sandbox import Sandbox

site = os.path.dirname(os.path.dirname(os.path.realpath(gem_core.__file__)))
sample = os.path.join(site, "gem_core", "data", "samples", "axon-rl__CodeContest", "train.jsonl")
secret = os.path.join(os.environ["GEM_DATA_DIR"], "secret.txt")
report = {"gem_core": gem_core.__file__, "sample_on_host": os.path.isfile(sample)}
with Sandbox(size=2) as sb:
    report["isolation"] = sb.isolation
    reads = sb.run(
        "import os\n"
        f"for path in {[sample, secret, os.path.join(site, 'gem_core', '__init__.py')]!r}:\n"
        "    try:\n"
        "        print('READ', path, len(open(path).read()))\n"
        "    except OSError as e:\n"
        "        print('denied', type(e).__name__)\n"
        f"print('listing', os.listdir({os.path.join(site, 'gem_core')!r}) if os.path.isdir({os.path.join(site, 'gem_core')!r}) else None)\n"
    )
    report["reads"] = reads.stdout + reads.stderr
    env = gem_core.make("code:CodeContest", sandbox=sb)
    rewards = []
    for index in range(3):
        env.reset(seed=0, options={"index": index})
        rewards.append(env.step("```python\n" + sys.argv[1] + "\n```")[1])
    env.close()
    report["lookup_rewards"] = rewards
    import time
    laps = []
    for _ in range(40):  # back to back: the /tmp wipe must not walk the venv bound inside /tmp
        start = time.perf_counter()
        sb.run("print(1 + 1)")
        laps.append(time.perf_counter() - start)
    report["p50_s"] = sorted(laps)[len(laps) // 2]
print(json.dumps(report))
'''

# What a reward hacker submits: find the shipped sample on sys.path and print the answer.
_LOOKUP = r'''
import json, os, sys
data = sys.stdin.read()
for entry in sys.path:
    root = os.path.join(entry, "gem_core", "data", "samples")
    for name in (os.listdir(root) if os.path.isdir(root) else []):
        for split in ("train.jsonl", "test.jsonl"):
            try:
                lines = open(os.path.join(root, name, split)).read().splitlines()
            except OSError:
                continue
            for line in lines:
                tests = json.loads(line).get("tests")
                tests = json.loads(tests) if isinstance(tests, str) else tests
                if isinstance(tests, dict):
                    for i, o in zip(tests.get("inputs", []), tests.get("outputs", [])):
                        if i == data:
                            print(o, end="")
                            sys.exit(0)
print("not found")
'''


@requires_bwrap
@pytest.mark.timeout(180)
def test_a_normal_install_does_not_show_gem_core_or_its_data_to_sandboxed_code(tmp_path):
    # Regression: with a non-editable install the sandbox ro-bound the whole venv,
    # site-packages/gem_core/data/samples included: a lookup program passed code:CodeContest.
    import site
    import subprocess
    import sys

    src = tmp_path / "src"
    src.mkdir()
    repo = Path(__file__).resolve().parents[2]
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, src / name)
    shutil.copytree(repo / "gem_core", src / "gem_core", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"  # a venv under /tmp, as on many CI runners
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    target = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", target, str(src)], check=True, timeout=120,
                   capture_output=True)
    # gem_core's own dependencies (numpy) come from this venv, listed after the install.
    Path(target, "zz-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    for i in range(40):  # the size of a real venv (torch alone has ~15 000 files)
        package = Path(target, "bulk", f"m{i}")
        package.mkdir(parents=True)
        for j in range(1000):
            (package / f"f{j}.py").touch()
    data_dir = venv / "share" / "gem-data"  # a dataset dir inside the bound installation
    data_dir.mkdir(parents=True)
    (data_dir / "secret.txt").write_text("dataset-secret")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "GEM_DATA": "sample",
           "GEM_DATA_DIR": str(data_dir)}
    proc = subprocess.run([str(py), "-c", _INSTALLED_CHILD, _LOOKUP], capture_output=True, text=True,
                          timeout=150, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["gem_core"].startswith(target), report  # the installed copy, not the checkout
    assert report["sample_on_host"] and report["isolation"] == "bwrap", report
    assert "READ" not in report["reads"], report["reads"]
    assert report["reads"].count("denied") == 3, report["reads"]
    assert report["lookup_rewards"] == [0.0, 0.0, 0.0], report
    # Quiet: 6.5 ms (at load 4); ~100-150 ms when the wipe walked the 40 000 files. The bound
    # is 7x the one, a third to a half of the other.
    assert report["p50_s"] < 0.05, report


# ----------------------------------------------------------------------------- resource bounds


@requires_bwrap
def test_private_tmp_is_size_limited():
    # Regression: the /tmp tmpfs had no --size (375 MiB written with memory_mb=128).
    from gem_core.sandbox import Sandbox

    fill = (
        "import os\nwritten = 0\n"
        "try:\n"
        "    for i in range(64):\n"
        "        with open(f'/tmp/fill-{i}', 'wb') as f:\n"
        "            for _ in range(4):\n"
        "                f.write(b'x' * (1 << 20))\n"
        "                written += 1\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, e.errno)\n"
        "print(written)\n"
    )
    with Sandbox(size=1, tmp_mb=24, file_size_mb=8, timeout_s=20) as sb:
        assert sb.isolation == "bwrap"
        result = sb.run(fill)
        assert result.stdout.startswith("OSError 28\n"), result  # ENOSPC
        assert int(result.stdout.split()[-1]) <= 24, result
        assert sb.run("print(1)").stdout == "1\n"  # the full /tmp was wiped
    with Sandbox(size=1, file_size_mb=4, timeout_s=20) as sb:  # default: 4 x file_size_mb
        assert int(sb.run(fill).stdout.split()[-1]) <= 16


_HOGS = """
import os, sys, time
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(150 << 20)
        block[::4096] = b"\\1" * len(range(0, len(block), 4096))   # really touch every page
        time.sleep(1.5)
        os._exit(0)
    kids.append(pid)
print(sorted(os.waitpid(pid, 0)[1] == 0 for pid in kids).count(True))
"""


def test_memory_is_bounded_across_the_processes_of_a_run():
    # Regression: memory was bounded per process only (five children held 1.6 GiB with
    # memory_mb=512). With a memory cgroup the run's processes share memory_mb.
    from gem_core.sandbox import Sandbox

    with Sandbox(size=1, memory_mb=256, timeout_s=20) as sb:
        if sb.memory_scope != "run":
            assert sb.memory_scope == "process"
            pytest.skip("no writable memory cgroup here: memory is bounded per process "
                        f"(max_processes={sb.max_processes} x memory_mb)")
        result = sb.run(_HOGS)
        assert result.stdout == "1\n", result  # 4 x 150 MiB do not fit in 256 MiB together
        assert sb.run("print(2)").stdout == "2\n"  # the worker survived its run's OOM kills


def test_without_a_memory_cgroup_the_bound_is_documented_and_processes_are_fewer(monkeypatch):
    from gem_core.sandbox import Sandbox, pool

    monkeypatch.setattr(pool, "_memory_cgroup_root", lambda: None)
    with Sandbox(size=1) as sb:
        assert sb.memory_scope == "process" and sb.max_processes == 16
        assert sb.run("print(3)").stdout == "3\n"


def test_two_pools_in_one_process_do_not_share_uids():
    # Regression: the uid base depended on the pid only, so one pool's processes counted
    # against (and could exhaust) the other's RLIMIT_NPROC.
    from gem_core.sandbox import Sandbox

    with Sandbox(size=1) as a, Sandbox(size=1) as b:
        if a._drop_uid_base is None:
            pytest.skip("executions keep the host's uid here (not root, or a Python the dropped uid cannot read)")
        uid_a = a.run("import os; print(os.getuid())").stdout
        uid_b = b.run("import os; print(os.getuid())").stdout
        assert uid_a != uid_b, (uid_a, uid_b)


@requires_bwrap
def test_runs_cannot_create_user_namespaces():
    from gem_core.sandbox import Sandbox

    code = (
        "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), errno.errorcode.get(ctypes.get_errno()))\n"  # CLONE_NEWUSER
    )
    with Sandbox(size=1) as sb:
        assert sb.isolation == "bwrap"
        assert sb.run(code).stdout == "-1 EPERM\n"
        forked = sb.run("import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nprint('forked')")
        assert forked.stdout == "forked\n", forked  # plain fork (clone) still works
