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
    """A roomy limit, and nothing known of any kind of env (what earlier tests taught is kept per process)."""
    monkeypatch.setattr(env_calls, "INLINE_MAX_S", LIMIT_S)
    monkeypatch.setattr(env_calls, "QUICK_SAMPLES", 1)  # one timed call decides (tests of the default below)
    monkeypatch.setattr(env_calls, "_SPEED", {})
    monkeypatch.setattr(env_calls, "_SEEN", set())


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


def test_auto_runs_a_quick_method_on_the_event_loop_from_its_third_call():
    env = Probe(episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 5))
    assert _places(env, loop_thread) == "TTLLL"  # the first call is not counted, the second is timed


def test_by_default_three_timed_calls_decide(monkeypatch):
    monkeypatch.setattr(env_calls, "QUICK_SAMPLES", 3)
    env = Probe(episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 6))
    assert _places(env, loop_thread) == "TTTTLL"
    once_slow = type("OnceSlow", (Probe,), {})(slow_steps={3}, episode_len=100)
    loop_thread = asyncio.run(_calls(once_slow, "auto", 6))
    assert _places(once_slow, loop_thread) == "TTTTTT"  # its third call was slow: back to counting streaks


def test_each_slow_call_on_the_loop_doubles_the_quick_calls_needed_to_go_back(monkeypatch):
    monkeypatch.setattr(env_calls, "REPROBE_AFTER", 2)
    env = Probe(slow_steps={3, 8}, episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 17))
    # slow at 3 on the loop: 2 -> 4 quick ones needed (4-7); inline at 8, slow: 8 needed (9-16); inline at 17
    assert _places(env, loop_thread) == "TTL" + "TTTT" + "L" + "T" * 8 + "L"


def test_an_env_that_declares_blocking_calls_never_runs_inline():
    blocking = type("Blocking", (Probe,), {"blocking_calls": True})(episode_len=100)
    loop_thread = asyncio.run(_calls(blocking, "auto", 5))
    assert _places(blocking, loop_thread) == "TTTTT"
    from gem_core.distributed import RemoteEnv

    assert RemoteEnv.blocking_calls is True


def test_an_env_whose_unwrapped_raises_runs_in_threads():
    class NoUnwrapped(Probe):
        @property
        def unwrapped(self):
            raise RuntimeError("no unwrapped here")

    env = NoUnwrapped(episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 4))
    assert _places(env, loop_thread) == "TTTT" and env.steps == 4


def test_a_slow_first_call_is_not_counted():
    env = Probe(slow_steps={1}, episode_len=100)  # e.g. imports and caches on first use
    loop_thread = asyncio.run(_calls(env, "auto", 4))
    assert _places(env, loop_thread) == "TTLL"


def test_auto_moves_a_method_to_threads_once_a_call_was_slow():
    env = Probe(slow_steps={3}, episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 7))
    # step 3 ran on the loop (quick so far) and took too long: steps 4.. go to the thread pool
    assert _places(env, loop_thread) == "TTLTTTT"
    slow_kind = type("Slow", (Probe,), {})(slow_steps={2, 3, 4, 5}, episode_len=100)
    loop_thread = asyncio.run(_calls(slow_kind, "auto", 5))
    assert _places(slow_kind, loop_thread) == "TTTTT"  # slow from its timed call on: never inline


def test_a_kind_found_slow_goes_inline_again_after_enough_quick_calls(monkeypatch):
    monkeypatch.setattr(env_calls, "REPROBE_AFTER", 2)
    env = Probe(slow_steps={3}, episode_len=100)
    loop_thread = asyncio.run(_calls(env, "auto", 9))
    # slow at 3 on the loop (which doubles the 2 needed): four quick ones in threads, back inline
    assert _places(env, loop_thread) == "TTLTTTTLL"
    monkeypatch.setattr(env_calls, "REPROBE_AFTER", 3)
    mixed = type("Mixed", (Probe,), {})(slow_steps={2, 5, 8, 11}, episode_len=100)  # slow every third step
    loop_thread = asyncio.run(_calls(mixed, "auto", 12))
    assert _places(mixed, loop_thread) == "T" * 12  # never three quick ones in a row


def test_what_is_learnt_holds_for_every_env_of_the_kind_and_each_method_on_its_own():
    first = Probe(episode_len=100)
    loop_thread = asyncio.run(_calls(first, "auto", 3, reset=True))
    assert _places(first, loop_thread, "reset") == "T" and _places(first, loop_thread) == "TTL"
    second = Probe(episode_len=100)  # a fresh env of the same kind, in a later collection
    loop_thread = asyncio.run(_calls(second, "auto", 2, reset=True))
    assert _places(second, loop_thread, "reset") == "T" and _places(second, loop_thread) == "LL"
    third = Probe(episode_len=100)
    loop_thread = asyncio.run(_calls(third, "auto", 1, reset=True))
    assert _places(third, loop_thread, "reset") == "L"  # reset's second call was timed quick
    other = type("Other", (Probe,), {})(episode_len=100)  # another kind starts from nothing
    loop_thread = asyncio.run(_calls(other, "auto", 3))
    assert _places(other, loop_thread) == "TTL"


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
    # The thread's current event loop is put back after each call (asyncio.run clears it):
    # code that drives its own loop with run_until_complete keeps working.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_calls(Probe(episode_len=100, nested_asyncio=True), "inline", 2))
        assert asyncio.get_event_loop_policy().get_event_loop() is loop
    finally:
        asyncio.set_event_loop(None)
        loop.close()


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


def test_unknown_mode_is_refused():
    with pytest.raises(InvalidArgument, match="env_calls must be one of"):
        EnvCaller("fast")


class EchoChat:
    async def chat(self, messages, sampling):
        from gem_core.rl.sampling import ChatResult

        return ChatResult(text="go", finish_reason="stop")


@pytest.mark.parametrize(("mode", "expected"), [("auto", "TTLL"), ("thread", "TTTT"), ("inline", "LLLL")])
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
