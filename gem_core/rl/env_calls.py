"""Where the episode loop runs an env's ``reset`` and ``step``: a thread, or the event loop itself.

A call handed to a thread pool costs two thread hand-offs, and each waits for the GIL:
with 64 episodes in flight, their HTTP clients' threads and a model server on the same
cores, a hand-off of a GuessTheNumber step (microseconds of work) took ~20 ms, and the
env calls took 1-28 % of the rollout's wall time over four runs
(`benchmarks/bench_rollout_share.py`); run on the event loop, 0.6-1.4 % (episodes per
second: 1.4-1.9x at concurrency 8; at 64, where the server is the bottleneck, 0.85-1.7x).
But a slow call on the event loop stalls every episode of the collection. So by default (``"auto"``) each env
method is timed, per kind of env (the env's class and its unwrapped class):

- the first call of a kind runs in the thread pool and is not counted (it may pay for
  imports and caches); the next `QUICK_SAMPLES` run there too, timed;
- once those all took at most `INLINE_MAX_S`, the next calls — of any env of that kind —
  run on the event loop, still timed;
- once one took longer, that kind's calls run in the thread pool (timed) until
  `REPROBE_AFTER` of them in a row were quick again (a call slowed by the OS, not by the
  env, does not send a cheap env to the threads for good); each slow call on the event
  loop doubles that count for the kind, so an env that is only sometimes slow soon stays in
  the threads.

A game's step goes inline from its fifth call; a sandboxed code run, a search or an env
waiting for a user simulator stays in the thread pool. An env class whose calls block by
design declares ``blocking_calls = True`` (`gem_core.distributed.RemoteEnv` does: each call
waits for a Ray actor) and never runs inline. Keyed by kind, not by env object, so the
fresh envs of a new collection (64 of them at concurrency 64) need no hand-off each to be
known. The learnt state is per process, shared by its event loops (updates may race; the
worst outcome is one more call in the wrong place).

An env call run on the event loop sees no running event loop (as in a thread), so an env
that calls ``asyncio.run`` itself still works; the thread's current event loop is put
back afterwards. An env that waits on a coroutine it submitted to the engine's own loop
(``asyncio.run_coroutine_threadsafe(..., loop).result()``) must use ``"thread"``.

``"thread"``: always the thread pool (the behaviour before ``"auto"``). ``"inline"``:
always the event loop (for envs known to be cheap; a slow call stalls the others).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = ["ENV_CALLS", "INLINE_MAX_S", "QUICK_SAMPLES", "REPROBE_AFTER", "EnvCaller", "check_env_calls", "in_thread"]

ENV_CALLS = ("auto", "thread", "inline")
#: The longest an env method's calls may take for ``"auto"`` to run them on the event loop.
INLINE_MAX_S = 1e-3
#: Timed quick calls (in the thread pool) a kind needs before its calls run inline.
QUICK_SAMPLES = 3
#: Quick calls in a row (in the thread pool) after which a kind found slow runs inline again
#: (doubled by each slow call on the event loop).
REPROBE_AFTER = 32


class _Speed:
    """What is known of one kind's method: ``quick`` None (being timed in threads: ``streak``
    quick calls so far), True (inline) or False (in threads, ``streak`` quick calls in a row
    since, ``reprobe`` of them needed to go inline again)."""

    __slots__ = ("quick", "streak", "reprobe")

    def __init__(self) -> None:
        self.quick: bool | None = None
        self.streak = 0
        self.reprobe = REPROBE_AFTER

    def note(self, seconds: float) -> None:
        if seconds > INLINE_MAX_S:
            if self.quick:  # a slow call ran on the event loop: wait twice as long next time
                self.reprobe *= 2
            self.quick, self.streak = False, 0
            return
        if self.quick:
            return
        self.streak += 1
        if self.streak >= (QUICK_SAMPLES if self.quick is None else self.reprobe):
            self.quick, self.streak = True, 0


# {(env class, unwrapped class, method name): its _Speed}, from the second call of a kind
# on; shared by every collection of this process.
_SPEED: dict[tuple[type, type, str], _Speed] = {}
_SEEN: set[tuple[type, type, str]] = set()


def check_env_calls(env_calls: str) -> str:
    """``env_calls`` if it is one of `ENV_CALLS`, else `InvalidArgument`."""
    if env_calls not in ENV_CALLS:
        raise InvalidArgument(f"env_calls must be one of {ENV_CALLS}, got {env_calls!r}")
    return env_calls


async def in_thread(
    executor: concurrent.futures.Executor | None, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    """``fn(*args, **kwargs)`` in ``executor`` (``None``: the running loop's default thread pool)."""
    return await asyncio.get_running_loop().run_in_executor(executor, lambda: fn(*args, **kwargs))


def _kind(env: Any, name: str) -> tuple[type, type, str] | None:
    """``(env class, unwrapped class, method)``, or None: never inline (the env says its calls
    block, or its ``unwrapped`` raises)."""
    if getattr(type(env), "blocking_calls", False):
        return None
    try:
        return (type(env), type(env.unwrapped), name)
    except Exception:
        return None


def _inline(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` on this thread with no running event loop set, as in a worker thread."""
    loop = asyncio._get_running_loop()  # public-but-underscored: the API uvloop and others use
    # An asyncio.run inside the call sets the thread's current loop to None when it ends:
    # put back the one there was (the default policy keeps it in ``_local._loop``).
    policy = asyncio.get_event_loop_policy()
    local = getattr(policy, "_local", None)
    current = getattr(local, "_loop", None)
    asyncio._set_running_loop(None)
    try:
        return fn(*args, **kwargs)
    finally:
        asyncio._set_running_loop(loop)
        if local is not None and getattr(local, "_loop", None) is not current:
            policy.set_event_loop(current)


class EnvCaller:
    """Runs env methods for the episode loop under one of `ENV_CALLS` (see the module docs).

    Args:
        env_calls: ``"auto"``, ``"thread"`` or ``"inline"``.
        executor: the thread pool for the calls not run inline (``None``: the loop's default).
    """

    __slots__ = ("mode", "executor")

    def __init__(self, env_calls: str = "auto", executor: concurrent.futures.Executor | None = None):
        self.mode = check_env_calls(env_calls)
        self.executor = executor

    async def __call__(self, env: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        """``getattr(env, name)(*args, **kwargs)``, inline or in the thread pool."""
        fn = getattr(env, name)
        if self.mode == "inline":
            return _inline(fn, args, kwargs)
        if self.mode == "thread":
            return await in_thread(self.executor, fn, *args, **kwargs)
        kind = _kind(env, name)
        if kind is None:
            return await in_thread(self.executor, fn, *args, **kwargs)
        speed = _SPEED.get(kind)
        if speed is None and kind in _SEEN:
            speed = _SPEED.setdefault(kind, _Speed())
        if speed is not None and speed.quick:
            start = time.perf_counter()
            try:
                return _inline(fn, args, kwargs)
            finally:
                speed.note(time.perf_counter() - start)
        took: list[float] = []

        def timed() -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took.append(time.perf_counter() - start)

        try:
            return await in_thread(self.executor, timed)
        finally:
            if speed is None:
                _SEEN.add(kind)  # the first call: not counted
            elif took:
                speed.note(took[0])
