"""`AsyncVectorEnv` workers: sharding, the state machine, timeouts, dead workers, start methods."""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import signal
import threading
import time

import pytest

from gem_core.errors import (
    AlreadyPendingCallError,
    InvalidArgument,
    NoAsyncCallError,
    ResetNeeded,
    WorkerError,
    WorkerTimeout,
)
from gem_core.vector import AsyncState, AsyncVectorEnv, make_vec
from tests.testing_env import GenericTestEnv, counting_step
from tests.vector.conftest import generic

pytestmark = pytest.mark.timeout(60)


def sleepy_step(env, action):
    """``"sleep"`` blocks for 30 s, ``"nap"`` for 0.4 s; otherwise counts."""
    if action == "sleep":
        time.sleep(30)
    elif action == "nap":
        time.sleep(0.4)
    return counting_step(env, action)


def pid_reset(env, seed, options):
    env.t = 0
    return f"pid {os.getpid()}", {}


def lock_reset(env, seed, options):
    return threading.Lock(), {}


def lock_attr_reset(env, seed, options):
    env.t = 0
    env.lock = threading.Lock()
    return "start", {}


def broken_factory():
    raise RuntimeError("cannot build this env")


def slow_factory():
    time.sleep(30)
    return GenericTestEnv()


@pytest.fixture
def vecs():
    made: list[AsyncVectorEnv] = []

    def _make(env_fns, **kwargs):
        kwargs.setdefault("timeout", 20.0)
        vec = AsyncVectorEnv(env_fns, **kwargs)
        made.append(vec)
        return vec

    yield _make
    for vec in made:
        vec.close()


def _wait_dead(vec, worker):
    """Block until worker ``worker`` of ``vec`` has exited (after a SIGKILL)."""
    multiprocessing.connection.wait([vec._workers[worker].process.sentinel], timeout=10)


# ----------------------------------------------------------------------------- sharding


def test_shards_are_contiguous_one_process_per_worker(vecs):
    vec = vecs([generic(reset_fn=pid_reset)] * 7, num_workers=3)
    assert vec.num_workers == 3
    pids = vec.worker_pids
    assert len(set(pids)) == 3 and os.getpid() not in pids
    obs, _ = vec.reset()
    expected = [pids[0]] * 2 + [pids[1]] * 2 + [pids[2]] * 3
    assert obs == [f"pid {p}" for p in expected]


def test_default_num_workers_is_bounded_by_envs_and_cpus(vecs):
    vec = vecs([generic()] * 2)
    assert 1 <= vec.num_workers <= 2
    assert vecs([generic()]).num_workers == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_workers": 0}, r"num_workers must be an int in \[1, num_envs=2\].*got 0"),
        ({"num_workers": 3}, "got 3"),
        ({"context": "teleport"}, "context must be None or one of .*got 'teleport'"),
        ({"timeout": 0}, "timeout must be a positive number of seconds.*got 0"),
        ({"timeout": "1"}, "got '1'"),
    ],
)
def test_bad_constructor_arguments(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        AsyncVectorEnv([generic()] * 2, **kwargs)


def test_factory_error_is_re_raised_with_the_remote_traceback():
    before = set(multiprocessing.active_children())
    with pytest.raises(RuntimeError, match="cannot build this env") as excinfo:
        AsyncVectorEnv([generic(), broken_factory], num_workers=2, timeout=20)
    notes = "\n".join(getattr(excinfo.value, "__notes__", []))
    if hasattr(excinfo.value, "add_note"):
        assert "worker 1" in notes and "broken_factory" in notes
    leftover = set(multiprocessing.active_children()) - before
    assert not leftover, f"workers left running: {leftover}"


# ------------------------------------------------------------------------ state machine


def test_state_machine(vecs):
    vec = vecs([generic()] * 2)
    assert vec.state is AsyncState.DEFAULT
    with pytest.raises(NoAsyncCallError, match=r"step_wait\(\) called without a pending step_async\(\) \(nothing is pending\)"):
        vec.step_wait()
    vec.reset_async(seed=0)
    assert vec.state is AsyncState.WAITING_RESET
    with pytest.raises(AlreadyPendingCallError, match=r"reset_async\(\) called while a reset is pending.*reset_wait\(\) first"):
        vec.reset_async()
    with pytest.raises(AlreadyPendingCallError, match="step_async"):
        vec.step(["a", "b"])
    with pytest.raises(NoAsyncCallError, match=r"\(a reset is pending\)"):
        vec.step_wait()
    obs, _ = vec.reset_wait()
    assert all(o.startswith("start ") for o in obs)
    vec.step_async(["a", "b"])
    assert vec.state is AsyncState.WAITING_STEP
    assert vec.step_wait()[0] == ["obs 1", "obs 1"]
    vec.call_async("episode_len")
    assert vec.state is AsyncState.WAITING_CALL
    assert vec.call_wait() == [3, 3]
    assert vec.state is AsyncState.DEFAULT
    vec.close()
    assert vec.state is AsyncState.CLOSED


def test_unpicklable_action_sends_nothing(vecs):
    vec = vecs([generic()] * 2)
    vec.reset(seed=0)
    with pytest.raises(InvalidArgument, match="could not be pickled.*must be picklable. Nothing was sent"):
        vec.step([threading.Lock(), "b"])
    assert vec.state is AsyncState.DEFAULT
    assert vec.step(["a", "b"])[0] == ["obs 1", "obs 1"]


# ------------------------------------------------------------------------------ timeouts


def test_step_timeout_then_close(vecs):
    vec = vecs([generic(step_fn=sleepy_step)] * 2, num_workers=2)
    vec.reset(seed=0)
    vec.timeout = 0.3  # for the step only: start-up and reset are not raced against 0.3 s
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"step timed out after 0.3 s waiting for worker 0 \(pid \d+, sub-envs 0-0\).*step_wait\(\) again.*close\(\)"):
        vec.step(["sleep", "a"])
    assert time.monotonic() - start < 5  # quiet: 0.30 s; the sleeping step would take 30 s
    assert vec.state is AsyncState.WAITING_STEP
    with pytest.raises(AlreadyPendingCallError, match="step is pending"):
        vec.step(["a", "b"])
    processes = _close_within_bound(vec)
    assert not any(p.is_alive() for p in processes)


def _close_within_bound(vec):
    """``vec.close()`` with a busy worker, asserted well under the grace; the workers' processes."""
    processes = [w.process for w in vec._workers]
    start = time.monotonic()
    vec.close()
    elapsed = time.monotonic() - start
    # Quiet: ~5 ms (30 ms with a Ray driver in this process); the bound is 100x that. A busy
    # worker that is not terminated, or that outlives SIGTERM, holds close() for the grace
    # (_CLOSE_GRACE_S, 5 s) plus 1 s and is then SIGKILLed (exit code -9): 6.0 s at any load.
    codes = [p.exitcode for p in processes]
    assert elapsed < 3, f"close() took {elapsed:.2f} s; worker exit codes {codes} (-9: killed after the grace)"
    return processes


def test_close_ends_a_busy_worker_whatever_sigterm_handler_the_parent_has(vecs):
    """A parent with a SIGTERM handler that does not exit (a Ray node's "drain for 30 s",
    inherited by forked workers) must not hold close() for the grace and the SIGKILL."""
    old = signal.signal(signal.SIGTERM, lambda signum, frame: time.sleep(30))
    try:
        vec = vecs([generic(step_fn=sleepy_step)] * 2, num_workers=2)
    finally:
        signal.signal(signal.SIGTERM, old)
    vec.reset(seed=0)
    vec.step_async(["sleep", "a"])
    time.sleep(0.2)
    processes = _close_within_bound(vec)  # with the handler inherited: 6.0 s
    assert processes[0].exitcode == -signal.SIGTERM, [p.exitcode for p in processes]


def test_timed_out_step_can_be_waited_for_again(vecs):
    vec = vecs([generic(step_fn=sleepy_step)] * 2, num_workers=2)
    vec.reset(seed=0)
    vec.step_async(["nap", "a"])
    with pytest.raises(WorkerTimeout):
        vec.step_wait(timeout=0.05)
    obs, rewards, *_ = vec.step_wait(timeout=10)
    assert obs == ["obs 1", "obs 1"] and rewards.tolist() == [1.0, 1.0]
    assert vec.step(["a", "b"])[0] == ["obs 2", "obs 2"]


def test_start_timeout():
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"start timed out after 0.5 s.*AsyncVectorEnv\(timeout=...\)"):
        AsyncVectorEnv([slow_factory], timeout=0.5)
    assert time.monotonic() - start < 5


# ---------------------------------------------------------------------------- dead workers


def test_killed_worker_reports_its_envs_and_restarts(vecs):
    vec = vecs([generic(10)] * 4, num_workers=2)
    vec.reset(seed=0)
    vec.step(["a"] * 4)
    victim = vec.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    _wait_dead(vec, 0)

    obs, rewards, terminated, truncated, infos = vec.step(["b"] * 4)
    assert obs == [None, None, "obs 2", "obs 2"]
    assert rewards.tolist() == [0.0, 0.0, 2.0, 2.0]
    assert truncated.tolist() == [True, True, False, False]
    assert not terminated.any()
    for i in (0, 1):
        error = infos[i]["error"]
        assert isinstance(error, WorkerError) and error.index == i and error.exc_type == "WorkerDied"
        assert f"worker 0 (pid {victim}, sub-envs 0-1) was killed by SIGKILL during step()" in str(error)
        assert "A fresh worker is started" in str(error)
    assert vec.worker_pids[0] is None

    # The next call starts a fresh worker; its envs are autoreset, the others go on.
    obs, rewards, terminated, truncated, infos = vec.step(["c"] * 4)
    assert vec.restarts == 1 and vec.worker_pids[0] not in (None, victim)
    assert obs[0].startswith("start ") and obs[1].startswith("start ")
    assert obs[2:] == ["obs 3", "obs 3"]
    obs, _ = vec.reset(seed=0)
    assert all(o.startswith("start ") for o in obs)
    assert vec.step(["d"] * 4)[0] == ["obs 1"] * 4


def test_worker_killed_mid_step(vecs):
    vec = vecs([generic(10, step_fn=sleepy_step)] * 2, num_workers=2)
    vec.reset(seed=0)
    vec.step_async(["sleep", "a"])
    time.sleep(0.1)
    os.kill(vec.worker_pids[0], signal.SIGKILL)
    obs, _, _, truncated, infos = vec.step_wait(timeout=10)
    assert obs == [None, "obs 1"] and truncated.tolist() == [True, False]
    assert "killed by SIGKILL during step()" in str(infos[0]["error"])


def test_idle_envs_of_a_dead_worker_report_at_their_next_step(vecs):
    vec = vecs([generic(10)] * 4, num_workers=2)
    vec.reset(seed=0)
    os.kill(vec.worker_pids[0], signal.SIGKILL)
    _wait_dead(vec, 0)
    assert vec.step({2: "a"})[0] == [None, None, "obs 1", None]  # the other worker goes on

    obs, _, _, truncated, infos = vec.step({0: "a"})  # the death is noticed here
    assert obs == [None] * 4 and truncated.tolist() == [True, False, False, False]
    assert "during step()" in str(infos[0]["error"])

    obs, _, _, truncated, infos = vec.step({1: "a"})  # sub-env 1's lost episode is reported
    assert truncated.tolist() == [False, True, False, False]
    assert "while sub-env 1 was idle" in str(infos[1]["error"])
    assert infos[1]["error"].index == 1
    obs, *_ = vec.step({1: "a"})
    assert obs[1].startswith("start ")  # and then it is reset like any ended sub-env


def test_killed_worker_under_disabled_autoreset(vecs):
    vec = vecs([generic(10)] * 2, num_workers=2, autoreset_mode="disabled")
    vec.reset(seed=0)
    os.kill(vec.worker_pids[1], signal.SIGKILL)
    _wait_dead(vec, 1)
    _, _, _, truncated, infos = vec.step(["a", "b"])
    assert truncated.tolist() == [False, True]
    assert "reset it with reset(options={'reset_mask': mask})" in str(infos[1]["error"])
    with pytest.raises(ResetNeeded, match=r"\[1\]"):
        vec.step(["a", "b"])
    obs, _ = vec.reset(options={"reset_mask": [False, True]})
    assert obs[0] is None and obs[1].startswith("start ")
    assert vec.step(["a", "b"])[0] == ["obs 2", "obs 1"]


def test_killed_worker_with_on_error_raise(vecs):
    vec = vecs([generic(10)] * 2, num_workers=2, on_error="raise")
    vec.reset(seed=0)
    os.kill(vec.worker_pids[1], signal.SIGKILL)
    _wait_dead(vec, 1)
    with pytest.raises(WorkerError, match="was killed by SIGKILL") as excinfo:
        vec.step(["a", "b"])
    assert excinfo.value.index == 1 and excinfo.value.exc_type == "WorkerDied"
    obs, _ = vec.reset()
    assert vec.step(["a", "b"])[0] == ["obs 1", "obs 1"]


def test_call_on_a_killed_worker_raises_then_recovers(vecs):
    vec = vecs([generic(10)] * 2, num_workers=2)
    vec.reset(seed=0)
    os.kill(vec.worker_pids[0], signal.SIGKILL)
    _wait_dead(vec, 0)
    with pytest.raises(WorkerError, match=r"worker 0 .*was killed by SIGKILL during call\('episode_len'\)"):
        vec.get_attr("episode_len")
    assert vec.get_attr("episode_len") == [10, 10]


def test_unpicklable_result_restarts_the_worker(vecs):
    vec = vecs([generic(reset_fn=lock_reset), generic()], num_workers=2)
    obs, infos = vec.reset(seed=0)
    assert obs[0] is None and obs[1].startswith("start ")
    error = infos[0]["error"]
    assert error.exc_type == "WorkerDied"
    assert "failed with TypeError" in str(error) and "pickle" in str(error)
    vec.get_attr("t")
    assert vec.restarts == 1


# ---------------------------------------------------------------------- start methods, close


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_env_ids_work_under_every_start_method(context):
    sync = make_vec("toy:Echo-v0", 3, seed=0)
    async_ = make_vec("toy:Echo-v0", 3, vectorization_mode="async", context=context, num_workers=2, seed=0)
    try:
        assert async_.context == context
        assert async_.reset()[0] == sync.reset()[0]
        assert async_.step(["abc"] * 3)[0] == sync.step(["abc"] * 3)[0]
    finally:
        sync.close()
        async_.close()


def test_garbage_collection_stops_the_workers():
    vec = AsyncVectorEnv([generic()] * 2, num_workers=2, timeout=20)
    processes = [w.process for w in vec._workers]
    del vec
    gc.collect()
    for p in processes:
        p.join(5)
    assert not any(p.is_alive() for p in processes)


def test_close_closes_the_sub_envs(tmp_path):
    marker = tmp_path / "closed"
    vec = AsyncVectorEnv(
        [functools.partial(GenericTestEnv, close_fn=functools.partial(_touch, marker))], timeout=20
    )
    vec.reset()
    vec.close()
    assert marker.read_text() == "closed"


def _touch(path, env):
    path.write_text("closed")


def test_unpicklable_call_result_keeps_the_worker(vecs):
    vec = vecs([generic(reset_fn=lock_attr_reset)] * 2, num_workers=1)
    vec.reset(seed=0)
    with pytest.raises(WorkerError, match=r"results of get_attr\('lock'\) on sub-envs 0-1 could not be pickled.*TypeError"):
        vec.get_attr("lock")
    assert vec.step(["a", "b"])[0] == ["obs 1", "obs 1"]  # the episodes go on
    assert vec.restarts == 0


def test_lambda_factories_need_fork():
    with pytest.raises(InvalidArgument, match=r"could not be sent to a worker started with context='spawn'.*functools.partial"):
        AsyncVectorEnv([lambda: GenericTestEnv()], context="spawn", timeout=20)


def test_interpreter_exit_without_close_stops_the_workers():
    import subprocess
    import sys

    script = (
        "import gem_core\n"
        "vec = gem_core.make_vec('toy:Echo-v0', 2, vectorization_mode='async', num_workers=2)\n"
        "vec.reset(seed=0)\n"
        "print(*vec.worker_pids)\n"
    )
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 20
    for pid in map(int, done.stdout.split()):
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"worker {pid} outlived its main process")


# --------------------------------------------------------------------------- local shard


def interrupting_step(env, action):
    if action == "interrupt":
        raise KeyboardInterrupt
    return counting_step(env, action)


def test_the_local_shard_runs_in_this_process_and_the_rest_in_workers(vecs):
    vec = vecs([generic(reset_fn=pid_reset)] * 5, num_workers=2, local_shard=True)
    assert vec.local_shard and vec.num_workers == 2
    pids = vec.worker_pids  # the worker processes only
    assert len(set(pids)) == 2 and os.getpid() not in pids
    obs, _ = vec.reset()
    # Three shards of 5 envs: [0, 1) here, [1, 3) and [3, 5) in the workers.
    assert obs == [f"pid {p}" for p in [os.getpid(), pids[0], pids[0], pids[1], pids[1]]]
    obs, rewards, terminated, truncated, infos = vec.step(["a"] * 5)
    assert list(obs) == ["obs 1"] * 5 and not any(truncated)


def test_local_shard_defaults_to_one_worker_fewer(vecs):
    vec = vecs([generic()] * 8, local_shard=True)
    cpus = len(os.sched_getaffinity(0))
    assert vec.num_workers == min(8, cpus) - 1
    alone = vecs([generic()] * 3, num_workers=0, local_shard=True)
    assert alone.worker_pids == [] and alone.busy_poll == 0.0
    alone.reset(seed=0)
    assert list(alone.step(["a"] * 3)[0]) == ["obs 1"] * 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"local_shard": True, "num_workers": 2}, r"num_workers must be an int in \[0, num_envs=2 - 1\].*got 2"),
        ({"local_shard": True, "num_workers": -1}, "got -1"),
        ({"local_shard": 1}, "local_shard must be True or False, got 1"),
        ({"busy_poll": -1e-6}, r"busy_poll must be seconds in \[0, 0.1\] or None"),
        ({"busy_poll": 1.0}, "got 1.0"),
        ({"busy_poll": True}, "got True"),
    ],
)
def test_bad_local_shard_and_busy_poll_arguments(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        AsyncVectorEnv([generic()] * 2, **kwargs)


def test_busy_poll_is_on_only_when_a_cpu_is_left_for_this_process(vecs):
    cpus = len(os.sched_getaffinity(0))
    if cpus >= 2:
        assert vecs([generic()] * 2, num_workers=cpus - 1).busy_poll > 0
    assert vecs([generic()] * cpus, num_workers=cpus).busy_poll == 0.0
    assert vecs([generic()] * 2, num_workers=1, busy_poll=0).busy_poll == 0.0


@pytest.mark.parametrize("busy_poll", [0.0, 0.05])
def test_busy_poll_does_not_change_results_or_timeouts(vecs, busy_poll):
    vec = vecs([generic(step_fn=sleepy_step)] * 2, num_workers=1, busy_poll=busy_poll)
    vec.reset(seed=0)
    assert list(vec.step(["nap", "a"])[0]) == ["obs 1", "obs 1"]  # a reply after the window
    vec.step_async(["sleep", "a"])
    start = time.monotonic()
    with pytest.raises(WorkerTimeout):
        vec.step_wait(timeout=0.3)
    assert time.monotonic() - start < 5


def test_a_killed_worker_restarts_beside_the_local_shard(vecs):
    vec = vecs([generic(episode_len=10)] * 4, num_workers=1, local_shard=True)
    vec.reset(seed=0)
    vec.step(["a"] * 4)
    os.kill(vec.worker_pids[0], signal.SIGKILL)
    _wait_dead(vec, 1)  # record 0 is the local shard's
    obs, rewards, terminated, truncated, infos = vec.step(["a"] * 4)
    assert list(obs[:2]) == ["obs 2", "obs 2"] and not any(truncated[:2])  # the local shard went on
    assert all(truncated[2:]) and all(infos[i]["error"].exc_type == "WorkerDied" for i in (2, 3))
    obs, *_ = vec.step(["a"] * 4)  # the lost envs are reset in a fresh worker
    assert list(obs[:2]) == ["obs 3", "obs 3"] and all(o.startswith("start") for o in obs[2:])
    assert vec.restarts == 1 and list(vec.step(["a"] * 4)[0]) == ["obs 4", "obs 4", "obs 1", "obs 1"]


def test_an_interrupt_in_the_local_shard_leaves_the_step_collectable(vecs):
    vec = vecs([generic(step_fn=interrupting_step, episode_len=10)] * 2, num_workers=1, local_shard=True)
    vec.reset(seed=0)
    with pytest.raises(KeyboardInterrupt):
        vec.step(["interrupt", "a"])
    assert vec.state is AsyncState.WAITING_STEP
    obs, rewards, terminated, truncated, infos = vec.step_wait()
    assert truncated[0] and "KeyboardInterrupt" in str(infos[0]["error"])
    assert obs[1] == "obs 1" and not truncated[1]
    obs, *_ = vec.step(["a", "a"])  # the interrupted env is reset; the other goes on
    assert obs[0].startswith("start") and obs[1] == "obs 2"
    assert list(vec.step(["a", "a"])[0]) == ["obs 1", "obs 3"]


def test_close_closes_the_local_shard(vecs):
    vec = vecs([generic()] * 2, num_workers=1, local_shard=True)
    local = vec._workers[0].batch.envs[0]
    vec.close()
    assert local.closed == 1
