"""`RayVectorEnv` on a two-node local cluster: the vector contract of `AsyncVectorEnv`, unchanged,
and the failures that are Ray's own (a killed actor, resources no node has)."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest

from gem_core.errors import InvalidArgument, WorkerError, WorkerTimeout
from gem_core.vector import AutoresetMode, SyncVectorEnv, make_vec
from tests.distributed.conftest import ACTOR
from tests.testing_env import GenericTestEnv, raising_step
from tests.vector import test_async_vector_env as _async_contract
from tests.vector import test_vector_env as _contract
from tests.vector.conftest import generic

pytestmark = pytest.mark.timeout(120)

# The contract: every test of tests/vector/test_vector_env.py that builds its vector env
# through the `build` fixture runs here, unchanged, with `build` making RayVectorEnvs.
for _name, _test in vars(_contract).items():
    if _name.startswith("test_") and "build" in inspect.signature(_test).parameters:
        globals()[_name] = _test

# AsyncVectorEnv's own tests that use only the public API (state machine, pickling,
# waiting again after a timeout), with `vecs` making RayVectorEnvs.
test_state_machine = _async_contract.test_state_machine
test_unpicklable_action_sends_nothing = _async_contract.test_unpicklable_action_sends_nothing
test_timed_out_step_can_be_waited_for_again = _async_contract.test_timed_out_step_can_be_waited_for_again
test_unpicklable_result_restarts_the_worker = _async_contract.test_unpicklable_result_restarts_the_worker
test_unpicklable_call_result_keeps_the_worker = _async_contract.test_unpicklable_call_result_keeps_the_worker


@pytest.fixture
def kind() -> str:
    return "ray"


@pytest.fixture
def build(ray_vecs):
    """One actor per vector env: the contract does not depend on sharding (the tests below
    cover shards), and an actor start is most of a test's time here."""

    def _build(env_fns, **kwargs):
        kwargs.setdefault("num_workers", 1)
        return ray_vecs(env_fns, **kwargs)

    return _build


@pytest.fixture
def vecs(ray_vecs):
    return ray_vecs


sleepy_step = _async_contract.sleepy_step


def kill_and_wait(actor, timeout: float = 30.0) -> None:
    """ray.kill() only asks for the kill: until the actor is observably dead, a call sent to
    it may still be served. Wait until a call fails with Ray's actor-died error."""
    import ray

    ray.kill(actor)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ready.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            continue
        time.sleep(0.05)
    raise AssertionError(f"the killed actor still answered after {timeout} s")


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_sync_and_ray_agree(ray_vecs, mode):
    fns = [generic(1 + k % 3, step_fn=raising_step) for k in range(5)]
    rng = np.random.default_rng(list(AutoresetMode).index(mode))
    ops = _contract._script(rng, 5)
    sync = SyncVectorEnv(fns, autoreset_mode=mode)
    try:
        expected = _contract._run_script(sync, ops)
    finally:
        sync.close()
    assert _contract._run_script(ray_vecs(fns, autoreset_mode=mode), ops) == expected


def test_shards_spread_over_both_nodes(ray_vecs, ray_cluster):
    vec = ray_vecs([generic(reset_fn=_async_contract.pid_reset)] * 5, num_workers=2,
                   ray_options={**ACTOR, "scheduling_strategy": "SPREAD"})
    assert len(set(vec.worker_nodes)) == 2
    obs, _ = vec.reset()
    pids = vec.worker_pids
    assert obs == [f"pid {p}" for p in [pids[0]] * 2 + [pids[1]] * 3]


def test_factory_error_is_re_raised_with_the_remote_traceback(ray_cluster):
    from gem_core.distributed import RayVectorEnv

    with pytest.raises(RuntimeError, match="cannot build this env") as excinfo:
        RayVectorEnv([generic(), _async_contract.broken_factory], num_workers=2, timeout=30,
                     ray_options=ACTOR)
    notes = "\n".join(getattr(excinfo.value, "__notes__", []))
    assert "worker 1 (Ray actor" in notes and "broken_factory" in notes


def test_start_timeout_names_the_resources(ray_cluster):
    from gem_core.distributed import RayVectorEnv

    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"start timed out after 1 s.*'resources': \{'gpu_box': 1\}.*ray status"):
        RayVectorEnv([generic()], timeout=1, ray_options={**ACTOR, "resources": {"gpu_box": 1}})
    assert time.monotonic() - start < 10


def test_step_timeout_then_close_kills_the_busy_actor(ray_vecs):
    vec = ray_vecs([generic(step_fn=sleepy_step)] * 2, num_workers=2)
    vec.reset(seed=0)
    vec.step_async(["sleep", "a"])
    with pytest.raises(WorkerTimeout, match=r"step timed out after 1 s waiting for worker 0 \(Ray actor, pid \d+.*step_wait\(\) again"):
        vec.step_wait(timeout=1)
    actors = vec.actors
    start = time.monotonic()
    vec.close()
    assert time.monotonic() - start < 10
    import ray

    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.ready.remote(), timeout=10)


def test_killed_actor_reports_its_envs_and_restarts(ray_vecs):
    vec = ray_vecs([generic(10)] * 4, num_workers=2)
    vec.reset(seed=0)
    vec.step(["a"] * 4)
    kill_and_wait(vec.actors[0])
    obs, rewards, terminated, truncated, infos = vec.step(["b"] * 4)
    assert obs == [None, None, "obs 2", "obs 2"]
    assert truncated.tolist() == [True, True, False, False] and not terminated.any()
    for i in (0, 1):
        error = infos[i]["error"]
        assert isinstance(error, WorkerError) and error.index == i and error.exc_type == "WorkerDied"
        assert "worker 0 (Ray actor" in str(error) and "died" in str(error)
        assert "during step()" in str(error) and "A fresh worker is started" in str(error)
    obs, *_ = vec.step(["c"] * 4)
    assert vec.restarts == 1
    assert obs[0].startswith("start ") and obs[1].startswith("start ") and obs[2:] == ["obs 3"] * 2


def test_actor_killed_mid_step(ray_vecs):
    import ray

    vec = ray_vecs([generic(10, step_fn=sleepy_step)] * 2, num_workers=2)
    vec.reset(seed=0)
    vec.step_async(["sleep", "a"])
    time.sleep(0.3)
    ray.kill(vec.actors[0])
    start = time.monotonic()
    obs, _, _, truncated, infos = vec.step_wait(timeout=20)
    assert time.monotonic() - start < 15
    assert obs == [None, "obs 1"] and truncated.tolist() == [True, False]
    assert "died" in str(infos[0]["error"]) and "during step()" in str(infos[0]["error"])


def test_make_vec_ray_mode(ray_cluster):
    sync = make_vec("toy:Echo-v0", 3, seed=0)
    vec = make_vec("toy:Echo-v0", 3, vectorization_mode="ray", num_workers=2, seed=0,
                   ray_options=ACTOR, timeout=30)
    try:
        assert repr(vec).startswith("RayVectorEnv(toy:Echo-v0, num_envs=3, num_workers=2")
        assert vec.reset()[0] == sync.reset()[0]
        assert vec.step(["abc"] * 3)[0] == sync.step(["abc"] * 3)[0]
    finally:
        sync.close()
        vec.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ray_options": {"max_restarts": 3}}, "ray_options may not set max_restarts.*restarts a dead env actor itself"),
        ({"ray_options": [1]}, "ray_options must be a dict of Ray actor options"),
        ({"num_workers": 3}, r"num_workers must be an int in \[1, num_envs=2\]"),
        ({"timeout": 0}, "timeout must be a positive number of seconds"),
    ],
)
def test_bad_constructor_arguments(kwargs, message):
    from gem_core.distributed import RayVectorEnv

    with pytest.raises(InvalidArgument, match=message):
        RayVectorEnv([generic()] * 2, **kwargs)


def test_make_vec_refuses_process_options_in_ray_mode():
    with pytest.raises(InvalidArgument, match=r"vectorization_mode='ray'\) got unknown option\(s\) 'context'"):
        make_vec("toy:Echo-v0", 2, vectorization_mode="ray", context="fork")


def _unused() -> GenericTestEnv:  # keeps the import used by the contract's factories
    return GenericTestEnv()



def test_a_users_env_module_reaches_ray_actors_only_through_use_env_modules(ray_cluster, user_module):
    """The cluster was started before the module was named (as a cluster started elsewhere
    is): registering the id in the driver is not enough, and the actor's error says where
    it looked and what to do; `use_env_modules` carries the module in the actors'
    ``runtime_env``."""
    import functools
    import sys

    import gem_core
    from gem_core.distributed import RayVectorEnv

    folder, name, env_id = user_module
    sys.path.insert(0, str(folder))
    __import__(name)  # the driver alone registers it
    fns = [functools.partial(gem_core.make, env_id)] * 2
    with pytest.raises(Exception, match=f"no env registered with id '{env_id}'") as excinfo:
        RayVectorEnv(fns, num_workers=2, timeout=60, ray_options=ACTOR)
    assert "a Ray worker" in str(excinfo.value) and "--env-module" in str(excinfo.value)
    gem_core.use_env_modules([name])
    vec = RayVectorEnv(fns, num_workers=2, timeout=60, ray_options=ACTOR)
    try:
        vec.reset(seed=3)
        rewards = [vec.step(["x", "x"])[1].tolist() for _ in range(3)]
        assert rewards == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
    finally:
        vec.close()
