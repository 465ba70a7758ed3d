"""The collector: many episodes at once, with a concurrency limit, env reuse and per-episode errors."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.errors import InvalidArgument
from gem_core.rl.chat import ChatFormatter
from gem_core.rl.loop import _call, _check_options, run_episode
from gem_core.rl.sampling import Policy, SamplingParams, derive_seed
from gem_core.rl.types import Episode

__all__ = ["collect_episodes", "collect_episodes_sync"]

logger = logging.getLogger(__name__)


class _EnvPool:
    """Reuses envs across the episodes of one collection (one user at a time each)."""

    def __init__(self, env_kwargs: Mapping[str, Any] | None, executor: concurrent.futures.Executor):
        self.env_kwargs = dict(env_kwargs or {})
        self.executor = executor
        self.free: dict[object, list[Env]] = {}
        self.all: list[Env] = []

    async def acquire(self, source: str | Callable[[], Env]) -> Env:
        key = source if isinstance(source, str) else id(source)
        free = self.free.setdefault(key, [])
        if free:
            return free.pop()
        if isinstance(source, str):
            from gem_core.registration import make

            env = await _call(self.executor, make, source, **self.env_kwargs)
        else:
            env = await _call(self.executor, source)
            if not isinstance(env, Env):
                raise InvalidArgument(
                    f"env factory {source!r} returned {type(env).__name__}, not a gem_core.Env"
                )
        self.all.append(env)
        return env

    def release(self, source: str | Callable[[], Env], env: Env, healthy: bool) -> None:
        if healthy:
            key = source if isinstance(source, str) else id(source)
            self.free.setdefault(key, []).append(env)
        else:
            self.all.remove(env)
            _close_quietly(env)

    def close(self) -> None:
        for env in self.all:
            _close_quietly(env)
        self.all.clear()
        self.free.clear()


def _close_quietly(env: Env) -> None:
    try:
        env.close()
    except Exception as exc:  # pragma: no cover - a failing close must not hide results
        logger.warning("closing %s raised %s: %s", env, type(exc).__name__, exc)


def _source_name(source: str | Callable[[], Env]) -> str:
    if isinstance(source, str):
        return source
    return (
        getattr(source, "__qualname__", None) or getattr(source, "__name__", None) or repr(source)
    )


async def collect_episodes(
    envs: str | Callable[[], Env] | Sequence[str | Callable[[], Env]],
    policy: Policy,
    formatter: ChatFormatter,
    *,
    seeds: Sequence[int | None],
    max_turns: int | None = None,
    sampling: SamplingParams | None = None,
    layout: str = "packed",
    concurrency: int = 32,
    truncated_response: str = "pass",
    truncation_reward: float = -1.0,
    generation_timeout: float | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    env_threads: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
) -> list[Episode]:
    """Run one episode per seed, up to ``concurrency`` at a time, on the running loop.

    Every episode is one `run_episode` coroutine; env construction, resets and steps run
    in a thread pool, so env work overlaps generation; envs are reused across episodes
    and closed at the end. A policy or env error ends only that episode
    (``episode.error``). With ``sampling.seed`` set, episode ``i`` samples with
    ``derive_seed(sampling.seed, "episode", i)``, so the result does not depend on
    ``concurrency`` or timing (up to the backend's batch numerics; exact with greedy
    decoding). Repeat a seed to get a GRPO group: episodes get
    ``group_id = f"{env_id}/{seed}"``.

    Args:
        envs: an env id (for `gem_core.make`) or a zero-argument factory returning an
            `Env`, used for every seed; or one per seed.
        policy: the model.
        formatter: the chat formatter.
        seeds: one env seed per episode.
        max_turns, sampling, layout, truncated_response, truncation_reward,
            generation_timeout: as in `run_episode`.
        concurrency: the most episodes in flight at once.
        env_kwargs: keyword arguments for `gem_core.make` (env ids only).
        env_threads: threads for env calls (default ``min(concurrency, 32)``).
        on_episode: called with each episode as it finishes (progress bars, logging).

    Returns:
        The episodes, in the order of ``seeds``.
    """
    _check_options(layout, truncated_response)
    seeds = list(seeds)
    if isinstance(envs, str) or callable(envs):
        sources: list[str | Callable[[], Env]] = [envs] * len(seeds)  # type: ignore[list-item]
    else:
        sources = list(envs)
        if len(sources) != len(seeds):
            raise InvalidArgument(
                f"got {len(sources)} envs for {len(seeds)} seeds: pass one env (id or "
                "factory) for all seeds, or exactly one per seed"
            )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidArgument(f"concurrency must be a positive int, got {concurrency!r}")
    sampling = sampling or SamplingParams()
    executor = concurrent.futures.ThreadPoolExecutor(
        max_workers=env_threads or min(concurrency, 32), thread_name_prefix="gem-env"
    )
    pool = _EnvPool(env_kwargs, executor)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, source: str | Callable[[], Env], seed: int | None) -> Episode:
        async with gate:
            name = _source_name(source)
            try:
                env = await pool.acquire(source)
            except Exception as exc:
                ep = Episode(env_id=name, seed=seed, layout=layout, end_reason="error")
                ep.error = f"env.make: {type(exc).__name__}: {exc}"
                logger.warning("could not build env %s: %s", name, exc)
            else:
                ep = await run_episode(
                    env,
                    policy,
                    formatter,
                    seed=seed,
                    max_turns=max_turns,
                    sampling=sampling.replace(seed=derive_seed(sampling.seed, "episode", i)),
                    layout=layout,
                    truncated_response=truncated_response,
                    truncation_reward=truncation_reward,
                    generation_timeout=generation_timeout,
                    env_id=name if not isinstance(source, str) else source,
                    executor=executor,
                )
                pool.release(source, env, healthy=not (ep.error or "").startswith("env."))
            ep.group_id = f"{ep.env_id}/{seed}"
            if on_episode is not None:
                on_episode(ep)
            return ep

    try:
        return list(
            await asyncio.gather(
                *(one(i, s, seed) for i, (s, seed) in enumerate(zip(sources, seeds, strict=True)))
            )
        )
    finally:
        await asyncio.get_running_loop().run_in_executor(executor, pool.close)
        executor.shutdown(wait=False)


def collect_episodes_sync(*args: Any, **kwargs: Any) -> list[Episode]:
    """`collect_episodes` from synchronous code (runs its own event loop).

    Raises:
        RuntimeError: called from a running event loop; ``await collect_episodes(...)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(collect_episodes(*args, **kwargs))
    raise RuntimeError(
        "collect_episodes_sync() was called inside a running event loop; "
        "use `await collect_episodes(...)` there"
    )
