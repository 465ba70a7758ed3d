"""Where the episode loop runs an env's ``reset`` and ``step``: a thread, or the event loop itself.

A call handed to a thread pool costs two thread hand-offs, and each waits for the GIL:
with 64 episodes in flight, their HTTP clients' threads and a model server on the same
cores, a hand-off of a GuessTheNumber step (microseconds of work) took ~20 ms and the
env calls were 3.8 % of the rollout's wall time (`benchmarks/bench_rollout_share.py`);
run on the event loop, 0.2 %, and 30 % more episodes per second. But a slow call on the
event loop stalls every episode of the collection. So by default (``"auto"``) each env
method is timed: its first call runs in the thread pool; while its calls take at most
`INLINE_MAX_S`, the next ones run on the event loop; once a call of it took longer, that
method of that env runs in the thread pool for good. A game's step goes inline after its
first call; a sandboxed code run, a search, a remote (Ray) env or an env waiting for a
user simulator never does (after the first slow call).

An env call run on the event loop sees no running event loop (as in a thread), so an env
that calls ``asyncio.run`` itself still works.

``"thread"``: always the thread pool (the behaviour before ``"auto"``). ``"inline"``:
always the event loop (for envs known to be cheap; a slow call stalls the others).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import weakref
from collections.abc import Callable
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = ["ENV_CALLS", "INLINE_MAX_S", "EnvCaller", "check_env_calls", "in_thread"]

ENV_CALLS = ("auto", "thread", "inline")
#: The longest an env method's calls may take for ``"auto"`` to run them on the event loop.
INLINE_MAX_S = 1e-3

# Per env object: {method name: True while its calls were quick, False once one was slow}.
# Weak, so an env's entry goes with it; shared by every collection of this process.
_SPEED: weakref.WeakKeyDictionary[Any, dict[str, bool]] = weakref.WeakKeyDictionary()


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


def _speeds(env: Any) -> dict[str, bool] | None:
    try:
        return _SPEED.setdefault(env, {})
    except TypeError:  # an object that cannot be weakly referenced: always measured anew
        return None


def _inline(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` on this thread with no running event loop set, as in a worker thread."""
    loop = asyncio._get_running_loop()  # public-but-underscored: the API uvloop and others use
    asyncio._set_running_loop(None)
    try:
        return fn(*args, **kwargs)
    finally:
        asyncio._set_running_loop(loop)


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
        speeds = _speeds(env)
        quick = None if speeds is None else speeds.get(name)
        if quick:
            start = time.perf_counter()
            try:
                return _inline(fn, args, kwargs)
            finally:
                if time.perf_counter() - start > INLINE_MAX_S:
                    speeds[name] = False  # type: ignore[index]
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
            if speeds is not None and quick is None and took:
                speeds[name] = took[0] <= INLINE_MAX_S
