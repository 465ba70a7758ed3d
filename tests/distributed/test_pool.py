"""`collect_episodes(..., env_pool=RayEnvPool(...))` on a two-node local cluster: the same seeded
episodes as the local pool, per-episode failures (a killed actor, a lost node, unpicklable
results), and the pool serving after them."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re

import pytest

import gem_core.rl as rl
from tests.distributed.conftest import ACTOR, NODE
from tests.distributed.envs import Scripted

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def formatter():
    pytest.importorskip("transformers", reason="the tiny tokenizer needs gem-core[rl] (transformers)")
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_tokenizer

    return rl.ChatFormatter(AutoTokenizer.from_pretrained(build_tiny_tokenizer(), local_files_only=True))


@pytest.fixture
def policy(formatter):
    from gem_core.rl.testing import TextPolicy

    def make(respond):
        return TextPolicy(formatter.tokenizer, respond)

    return make


def answer(text):
    """``boom`` for seed 4, ``lock`` for seed 6, a backend failure for seed 5, else ``ok``."""
    if "start 5" in text:
        raise rl.PolicyError("server said no")
    if "start 6" in text:
        return "lock"
    return "boom" if "start 4" in text else "ok"


def record(ep):
    d = dataclasses.asdict(ep)
    d.pop("stats")
    return d


@pytest.fixture
def pool(ray_cluster):
    from gem_core.distributed import RayEnvPool

    made = []

    def _make(**kwargs):
        kwargs.setdefault("ray_options", ACTOR)
        kwargs.setdefault("timeout", 60)
        made.append(RayEnvPool(**kwargs))
        return made[-1]

    yield _make
    for p in made:
        p.close()


SEEDS = [0, 4, 1, 5, 13, 2, 3, 7]


def test_same_episodes_as_the_local_pool(pool, policy, formatter):
    remote = pool(num_actors=2)
    factory = functools.partial(Scripted, 2)
    for envs, seeds, kwargs in [
        (factory, SEEDS, {}),
        ("game:GuessTheNumber-v0-easy", [0, 1, 2, 3], {"max_turns": 3}),
    ]:
        local = rl.collect_episodes_sync(envs, policy(answer), formatter, seeds=seeds, concurrency=4, **kwargs)
        ray_eps = rl.collect_episodes_sync(envs, policy(answer), formatter, seeds=seeds, concurrency=4,
                                           env_pool=remote, **kwargs)
        assert [record(e) for e in ray_eps] == [record(e) for e in local]
    assert len(remote.actors) <= 2


def test_errors_are_the_local_pool_s_and_envs_are_reused(pool, policy, formatter):
    remote = pool(num_actors=2)
    seeds = SEEDS + [6]
    eps = rl.collect_episodes_sync(functools.partial(Scripted, 2), policy(answer), formatter,
                                   seeds=seeds, concurrency=1, env_pool=remote)
    by_seed = {ep.seed: ep for ep in eps}
    assert by_seed[4].error == "env.step: ValueError: env exploded"
    assert by_seed[5].error == "policy: PolicyError: server said no"
    assert by_seed[13].error == "env.reset: OSError: no data"
    assert "could not be pickled to send it back from the actor" in by_seed[6].error
    assert by_seed[6].error.startswith("env.step: WorkerError")
    assert all(by_seed[s].end_reason == "terminated" for s in (0, 1, 2, 3, 7))
    # One episode at a time: one actor, and its env reused until an env error dropped it.
    assert len(remote.actors) == 1 and remote.restarts == 0
    assert remote.built == 3  # as the local pool: rebuilt after boom (4), no data (13), lock (6)
    assert not any(remote._free.values())  # the last env failed (6): dropped


def test_an_agent_loop_plays_its_own_episodes_on_the_pool(pool, policy, formatter):
    remote = pool(num_actors=1)

    async def agent_loop(seed):  # what an adapter's per-sample agent loop does
        async with remote.env("game:GuessTheNumber-v0-easy", env_kwargs={"max_turns": 2}) as env:
            return await rl.run_episode(env, policy(lambda t: "\\boxed{3}"), formatter, seed=seed)

    async def both():
        return await asyncio.gather(*(agent_loop(s) for s in range(3)))

    remote_eps = asyncio.run(both())
    local = rl.collect_episodes_sync("game:GuessTheNumber-v0-easy", policy(lambda t: "\\boxed{3}"), formatter,
                                     seeds=[0, 1, 2], env_kwargs={"max_turns": 2})
    for ep in local:
        ep.group_id = None
    assert [record(e) for e in remote_eps] == [record(e) for e in local]
    assert remote.built == 3
    asyncio.run(agent_loop(5))
    assert remote.built == 3  # reused


class _Started:
    """A ``slow``-answering policy function that tells which episodes have begun: an
    episode's first call (its prompt holds ``start <seed>``) comes after its env was built
    and reset on an actor."""

    def __init__(self):
        self.seeds = set()

    @property
    def calls(self):
        return len(self.seeds)

    def __call__(self, text):
        self.seeds.add(re.search(r"start (\d+)", text)[1])
        return "slow"

    async def wait(self, episodes, deadline_s=90.0):
        # Quiet: both actors start and build their envs in ~1 s; on a loaded 2-core box it
        # has taken over 10 s. The test needs every episode past env.make before it strikes.
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while self.calls < episodes:
            assert loop.time() < end, f"only {self.calls} of {episodes} episodes began in {deadline_s:g} s"
            await asyncio.sleep(0.05)


def test_killed_actor_flags_its_episodes_and_the_pool_serves_after(pool, policy, formatter, ray_cluster):
    import ray

    remote = pool(num_actors=2)
    factory = functools.partial(Scripted, 4)

    started = _Started()

    async def run():
        task = asyncio.ensure_future(rl.collect_episodes(
            factory, policy(started), formatter, seeds=list(range(6)), concurrency=6, env_pool=remote))
        await started.wait(6)  # every episode mid-way (4 steps of 0.4 s each), both actors busy
        assert len(remote._actors) == 2 and all(a.in_use and a.pid for a in remote._actors)
        victim = remote._actors[0]
        ray.kill(victim.handle)
        return victim, await task

    victim, eps = asyncio.run(run())
    flagged = [ep for ep in eps if ep.error]
    finished = [ep for ep in eps if not ep.error]
    assert flagged and finished
    for ep in flagged:
        assert ep.error.startswith("env.step: WorkerError: env actor 0") and "died" in ep.error, ep.error
        assert "The pool starts a fresh actor" in ep.error
    assert all(ep.end_reason == "terminated" and ep.num_turns == 4 for ep in finished)
    assert remote.restarts == 1
    again = rl.collect_episodes_sync(factory, policy(lambda t: "ok"), formatter, seeds=list(range(4)),
                                     concurrency=4, env_pool=remote)
    assert all(ep.error is None and ep.end_reason == "terminated" for ep in again)
    assert victim.handle not in remote.actors


def test_lost_node_flags_its_episodes_and_new_actors_go_to_the_remaining_node(pool, policy, formatter, ray_cluster):

    head_id = ray_cluster.head_node.node_id
    remote = pool(num_actors=2, ray_options={**ACTOR, "resources": {"gem_env": 1},
                                             "scheduling_strategy": "SPREAD"})
    factory = functools.partial(Scripted, 4)

    started = _Started()

    async def run():
        task = asyncio.ensure_future(rl.collect_episodes(
            factory, policy(started), formatter, seeds=list(range(4)), concurrency=4, env_pool=remote))
        await started.wait(4)
        assert len(remote._actors) == 2 and all(a.in_use and a.node for a in remote._actors)
        nodes = {a.node for a in remote._actors}
        assert nodes == {head_id, worker.node_id}, "SPREAD put both actors on one node"
        ray_cluster.remove_node(worker)
        return await task

    worker = next(n for n in ray_cluster.list_all_nodes() if n is not ray_cluster.head_node)
    try:
        eps = asyncio.run(run())
        flagged = [ep for ep in eps if ep.error]
        assert flagged and len(flagged) < len(eps)
        assert all("env actor" in ep.error and "died" in ep.error for ep in flagged)
        again = rl.collect_episodes_sync(factory, policy(lambda t: "ok"), formatter,
                                         seeds=list(range(4)), concurrency=4, env_pool=remote)
        assert all(ep.error is None for ep in again)
        assert {a.node for a in remote._actors} == {head_id}
    finally:
        ray_cluster.add_node(**NODE)
        ray_cluster.wait_for_nodes()
