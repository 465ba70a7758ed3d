"""The one collector (`gem_core.rl.collect.run_jobs`): concurrency limit, env reuse,
per-episode errors, progress and cancellation — alike for `collect_episodes` (token ids)
and `gem_core.eval.evaluate` (here in chat mode), which both run through it."""

from __future__ import annotations

import asyncio
import functools

import pytest

import gem_core.rl as rl
from gem_core.eval import evaluate
from gem_core.registration import register, registry
from gem_core.rl.collect import EpisodeJob, run_jobs
from tests.testing_env import GenericTestEnv


class Counted(GenericTestEnv):
    """``start <seed>``; the action ``boom`` raises in ``step``; seed 13 raises in
    ``reset``; counts the envs built and closed (class-wide)."""

    built: list[Counted] = []

    def __init__(self):
        def reset(env, seed, options):
            if seed == 13:
                raise OSError("no data")
            env.t = 0
            return f"start {seed}", {}

        def step(env, action):
            if action == "boom":
                raise ValueError("env exploded")
            env.t += 1
            return f"obs {env.t}", 1.0, env.t >= 2, False, {"success": env.t >= 2}

        super().__init__(reset_fn=reset, step_fn=step, close_fn=lambda env: None)
        type(self).built.append(self)


def answer_for(text):
    """``boom`` for seed 4, a backend failure for seed 5, else ``ok``."""
    if "start 5" in text:
        raise rl.PolicyError("server said no")
    return "boom" if "start 4" in text else "ok"


class Gauge:
    """Counts the requests in flight (the most at once in ``peak``)."""

    def __init__(self):
        self.now = self.peak = 0

    async def __call__(self, text):
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(0.01)
            return answer_for(text)
        finally:
            self.now -= 1


class TokenPolicy:
    def __init__(self, tokenizer):
        self.tok, self.gauge = tokenizer, Gauge()

    async def generate(self, prompt_ids, sampling):
        text = await self.gauge(self.tok.decode(prompt_ids))
        ids = list(self.tok(text, add_special_tokens=False)["input_ids"]) + [self.tok.eos_token_id]
        return rl.GenerationResult(ids, [0.0] * len(ids), "stop")


class ChatPolicy:
    def __init__(self):
        self.gauge = Gauge()

    async def chat(self, messages, sampling):
        return rl.ChatResult(await self.gauge(messages[0]["content"]), "stop", 1, 1)


@pytest.fixture
def counted():
    Counted.built = []
    yield Counted
    Counted.built = []


def closed(envs):
    return [env.closed for env in envs]


def summary(ep):
    return (ep.seed, ep.num_turns, ep.end_reason, ep.error and ep.error.split(":")[0])


SEEDS = [0, 4, 1, 5, 13, 2]
EXPECTED = [
    (0, 2, "terminated", None),
    (4, 1, "error", "env.step"),
    (1, 2, "terminated", None),
    (5, 0, "error", "policy"),
    (13, 0, "error", "env.reset"),
    (2, 2, "terminated", None),
]


def test_collect_episodes_reuses_envs_and_isolates_errors(tiny_tokenizer, counted):
    policy = TokenPolicy(tiny_tokenizer)
    seen = []
    episodes = rl.collect_episodes_sync(
        Counted, policy, rl.ChatFormatter(tiny_tokenizer), seeds=SEEDS, concurrency=1,
        on_episode=seen.append,
    )
    assert [summary(ep) for ep in episodes] == EXPECTED
    assert sorted(map(summary, seen)) == sorted(EXPECTED)  # progress: once per episode
    # One env at a time: reused, except after the env failed (step, reset): then rebuilt.
    assert len(counted.built) == 3 and closed(counted.built) == [1, 1, 1]
    assert policy.gauge.peak == 1


def test_evaluate_runs_through_the_same_collector(counted):
    env_id = "test:Counted-v0"
    register(env_id, Counted, override=True)
    try:
        policy = ChatPolicy()
        res = evaluate(env_id, api="chat", base_url="http://unused.invalid/v1", model="m",
                       episodes=len(SEEDS), seed=0, concurrency=1, policy=policy, progress=False)
    finally:
        dict.pop(registry, env_id, None)
    # evaluate's seeds are seed + i: the same failures at the same places.
    by_seed = {r["seed"]: r for r in res.records}
    assert by_seed[4]["error"].startswith("env.step: ValueError")
    assert by_seed[5]["error"] == "policy: PolicyError: server said no"
    assert all(by_seed[s]["error"] is None and by_seed[s]["num_turns"] == 2 for s in (0, 1, 2, 3))
    # The same reuse rule: rebuilt only after the env failed, all closed at the end.
    assert len(counted.built) == 2 and all(n == 1 for n in closed(counted.built))
    assert policy.gauge.peak == 1


def play_jobs(play, jobs, *, concurrency, on_episode=None, layout="per_turn"):
    return run_jobs(
        jobs, play, make_env=lambda source: source(), sampling=rl.SamplingParams(seed=9),
        concurrency=concurrency, layout=layout, on_episode=on_episode,
    )


@pytest.mark.parametrize("loop", ["token", "chat"])
def test_run_jobs_limits_concurrency_and_keeps_job_order(tiny_tokenizer, counted, loop):
    if loop == "token":
        policy = TokenPolicy(tiny_tokenizer)
        play = functools.partial(rl.run_episode, policy=policy,
                                 formatter=rl.ChatFormatter(tiny_tokenizer))
    else:
        policy = ChatPolicy()
        play = functools.partial(rl.run_chat_episode, policy=policy)

    def broken():
        raise RuntimeError("cannot build")

    jobs = [EpisodeJob(Counted, s, 100 + s, "counted", tag=i) for i, s in enumerate(SEEDS * 3)]
    jobs.append(EpisodeJob(broken, 0, None, "broken", tag="x"))
    finished = []
    episodes = asyncio.run(
        play_jobs(play, jobs, concurrency=3, on_episode=lambda job, ep: finished.append(job.tag))
    )
    assert [summary(ep) for ep in episodes[:-1]] == EXPECTED * 3
    assert episodes[-1].error == "env.make: RuntimeError: cannot build"
    assert episodes[-1].layout == "per_turn" and episodes[-1].env_id == "broken"
    assert sorted(finished, key=str) == sorted([*range(len(SEEDS) * 3), "x"], key=str)
    assert 1 < policy.gauge.peak <= 3
    assert len(counted.built) <= 3 + 6 and all(env.closed == 1 for env in counted.built)


@pytest.mark.parametrize("loop", ["token", "chat"])
def test_cancelling_a_collection_closes_every_env(tiny_tokenizer, counted, loop):
    started = asyncio.Event()
    waiting = []

    async def hang(*args):
        waiting.append(args)
        if len(waiting) == 2:  # both episodes in flight (env built, reset, first request sent)
            started.set()
        await asyncio.sleep(30)

    if loop == "token":
        policy = TokenPolicy(tiny_tokenizer)
        policy.generate = hang
        play = functools.partial(rl.run_episode, policy=policy,
                                 formatter=rl.ChatFormatter(tiny_tokenizer))
    else:
        policy = ChatPolicy()
        policy.chat = hang
        play = functools.partial(rl.run_chat_episode, policy=policy)

    async def main():
        jobs = [EpisodeJob(Counted, s, None, "counted") for s in range(4)]
        task = asyncio.create_task(play_jobs(play, jobs, concurrency=2))
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(main(), 20))
    assert len(counted.built) == 2 and closed(counted.built) == [1, 1]
