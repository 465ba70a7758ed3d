"""Where the episode loop runs env calls (`gem_core.rl.env_calls`): the event loop while they are quick, else a thread."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from gem_core import Env
from gem_core.errors import InvalidArgument
from gem_core.rl import env_calls, run_chat_episode
from gem_core.rl.env_calls import EnvCaller

# A quick call must stay under the limit on a loaded CI machine too, and a slow one stay over it.
LIMIT_S, SLOW_S = 0.05, 0.1


@pytest.fixture(autouse=True)
def _roomy_limit(monkeypatch):
    monkeypatch.setattr(env_calls, "INLINE_MAX_S", LIMIT_S)


class Probe(Env):
    """Records the thread of each call; ``slow_steps`` are the step numbers that sleep past the limit."""

    def __init__(self, slow_steps=(), episode_len=6, nested_asyncio=False):
        super().__init__()
        self.slow_steps, self.episode_len, self.nested = set(slow_steps), episode_len, nested_asyncio
        self.threads: list[tuple[str, int]] = []
        self.steps = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.threads.append(("reset", threading.get_ident()))
        self.t = 0
        return "start", {}

    def step(self, action):
        self.threads.append(("step", threading.get_ident()))
        self.steps += 1
        if self.steps in self.slow_steps:
            time.sleep(SLOW_S)
        if self.nested:  # an env that runs its own event loop (e.g. a sync MCP client)
            assert asyncio.run(asyncio.sleep(0, result="nested")) == "nested"
        self.t += 1
        return f"obs {self.t}", 0.0, self.t >= self.episode_len, False, {}


def _places(env: Probe, loop_thread: int, what: str = "step") -> str:
    """``L`` for a call on the event loop's thread, ``T`` for one in another thread."""
    return "".join("L" if tid == loop_thread else "T" for name, tid in env.threads if name == what)


async def _calls(env: Probe, mode: str, steps: int, *, reset: bool = False) -> int:
    caller = EnvCaller(mode)
    if reset:
        await caller(env, "reset", seed=0)
    else:
        env.reset(seed=0)
        env.threads.clear()
    for _ in range(steps):
        await caller(env, "step", "x")
    return threading.get_ident()


def test_auto_runs_a_quick_method_on_the_event_loop_after_its_first_call():
    env = Probe(episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 5))
    assert _places(env, loop_thread) == "TLLLL"


def test_auto_keeps_a_method_in_a_thread_for_good_once_a_call_was_slow():
    env = Probe(slow_steps={3}, episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 7))
    # step 3 ran on the loop (quick so far) and took too long: steps 4.. go to the thread pool
    assert _places(env, loop_thread) == "TLLTTTT"
    slow_first = Probe(slow_steps={1}, episode_len=100)
    loop_thread = asyncio.run(_calls(slow_first, "auto", 4))
    assert _places(slow_first, loop_thread) == "TTTT"


def test_each_method_is_timed_on_its_own_and_the_speed_outlives_the_episode():
    env = Probe(episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 3, reset=True))
    assert _places(env, loop_thread, "reset") == "T" and _places(env, loop_thread) == "TLL"
    env.threads.clear()
    loop_thread = asyncio.run(_calls(env, "auto", 2, reset=True))  # a later collection reuses the env
    assert _places(env, loop_thread, "reset") == "L" and _places(env, loop_thread) == "LL"


def test_thread_and_inline_modes_never_measure():
    env = Probe(episode_len=100)
    loop_thread = asyncio.run(_calls(env, "thread", 4))
    assert _places(env, loop_thread) == "TTTT"
    slow = Probe(slow_steps={1, 2}, episode_len=100)
    loop_thread = asyncio.run(_calls(slow, "inline", 3))
    assert _places(slow, loop_thread) == "LLL"


def test_an_env_running_its_own_event_loop_works_inline():
    env = Probe(episode_len=100, nested_asyncio=True)
    loop_thread = asyncio.run(_calls(env, "inline", 3))
    assert _places(env, loop_thread) == "LLL" and env.steps == 3


def test_an_inline_call_that_raises_propagates_and_the_loop_keeps_running():
    class Boom(Probe):
        def step(self, action):
            super().step(action)
            raise ValueError("bad move")

    async def main():
        env = Boom(episode_len=100)
        env.reset()
        caller = EnvCaller("inline")
        with pytest.raises(ValueError, match="bad move"):
            await caller(env, "step", "x")
        assert asyncio.get_running_loop() is not None  # still the running loop afterwards
        return await asyncio.sleep(0, result="alive")

    assert asyncio.run(main()) == "alive"


def test_an_env_that_cannot_be_weakly_referenced_stays_in_threads():
    class Slotted:
        __slots__ = ("threads",)

        def __init__(self):
            self.threads = []

        def step(self, action):
            self.threads.append(("step", threading.get_ident()))

    async def main(env):
        caller = EnvCaller("auto")
        for _ in range(3):
            await caller(env, "step", "x")
        return threading.get_ident()

    env = Slotted()
    loop_thread = asyncio.run(main(env))
    assert _places(env, loop_thread) == "TTT"


def test_unknown_mode_is_refused():
    with pytest.raises(InvalidArgument, match="env_calls must be one of"):
        EnvCaller("fast")


class EchoChat:
    async def chat(self, messages, sampling):
        from gem_core.rl.sampling import ChatResult

        return ChatResult(text="go", finish_reason="stop")


@pytest.mark.parametrize(("mode", "expected"), [("auto", "TLLL"), ("thread", "TTTT"), ("inline", "LLLL")])
def test_the_episode_loop_runs_env_calls_where_env_calls_says(mode, expected):
    async def main():
        env = Probe(episode_len=4)
        episode = await run_chat_episode(env, EchoChat(), seed=0, env_calls=mode)
        return env, episode, threading.get_ident()

    env, episode, loop_thread = asyncio.run(main())
    assert episode.error is None and len(episode.turns) == 4
    assert _places(env, loop_thread) == expected


def test_the_episode_loop_refuses_an_unknown_mode():
    with pytest.raises(InvalidArgument, match="env_calls"):
        asyncio.run(run_chat_episode(Probe(), EchoChat(), env_calls="fast"))
