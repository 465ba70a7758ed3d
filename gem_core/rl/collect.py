"""The collector: many episodes at once, with a concurrency limit, env reuse and per-episode errors.

`run_jobs` is the one collector: `collect_episodes` (training rollouts) and
`gem_core.eval.evaluate` both run their episodes through it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gem_core.core import Env
from gem_core.errors import InvalidArgument, UsageError, check_positive_int
from gem_core.rl.chat import ChatFormatter
from gem_core.rl.env_calls import in_thread
from gem_core.rl.loop import _check_options, run_episode
from gem_core.rl.sampling import Policy, SamplingParams, derive_seed
from gem_core.rl.types import Episode

__all__ = ["EpisodeJob", "EnvSource", "env_from_source", "run_jobs", "collect_episodes", "collect_episodes_sync"]

logger = logging.getLogger(__name__)

#: What an episode's env is built from: an env id or a zero-argument factory.
EnvSource = str | Callable[[], Env]


@dataclass(frozen=True, slots=True)
class EpisodeJob:
    """One episode for `run_jobs`.

    Attributes:
        source: what ``make_env`` builds the env from (an env id, a factory); jobs with
            the same source (equal ids, the same factory object) reuse each other's envs.
        seed: the env seed (``env.reset(seed=...)``).
        sampling_seed: the episode's sampling seed (replaces ``sampling.seed``).
        env_id: the id recorded on the episode.
        tag: the caller's (e.g. the episode's index); not used here.
    """

    source: Any
    seed: int | None
    sampling_seed: int | None
    env_id: str
    tag: Any = None


class _EnvPool:
    """Reuses envs across the episodes of one collection (one user at a time each)."""

    def __init__(self, make_env: Callable[[Any], Env], executor: concurrent.futures.Executor):
        self.make_env = make_env
        self.executor = executor
        self.free: dict[Hashable, list[Env]] = {}
        self.all: list[Env] = []

    @staticmethod
    def _key(source: Any) -> Hashable:
        return source if isinstance(source, str) else id(source)

    async def acquire(self, source: Any) -> Env:
        free = self.free.setdefault(self._key(source), [])
        if free:
            return free.pop()
        env = await in_thread(self.executor, self.make_env, source)
        self.all.append(env)
        return env

    async def release(self, source: Any, env: Env, healthy: bool) -> None:
        """Give ``env`` back for reuse, or close it (off the event loop) when its
        episode failed in the env."""
        if healthy:
            self.free.setdefault(self._key(source), []).append(env)
            return
        self.all.remove(env)
        await in_thread(self.executor, _close_quietly, env)

    def close(self) -> None:
        """Close every env; safe to call again, also from another thread meanwhile."""
        self.free.clear()
        while self.all:
            try:
                env = self.all.pop()
            except IndexError:  # emptied by a concurrent close
                break
            _close_quietly(env)


def _close_quietly(env: Env) -> None:
    try:
        env.close()
    except Exception as exc:  # pragma: no cover - a failing close must not hide results
        logger.warning("closing %s raised %s: %s", env, type(exc).__name__, exc)


def _source_name(source: EnvSource) -> str:
    if isinstance(source, str):
        return source
    return (
        getattr(source, "__qualname__", None) or getattr(source, "__name__", None) or repr(source)
    )


def env_from_source(source: EnvSource, env_kwargs: Mapping[str, Any]) -> Env:
    """The env of ``source``: ``gem_core.make(id, **env_kwargs)``, or the factory's env."""
    if isinstance(source, str):
        from gem_core.registration import make

        return make(source, **env_kwargs)
    env = source()
    if not isinstance(env, Env):
        raise InvalidArgument(
            f"env factory {source!r} returned {type(env).__name__}, not a gem_core.Env"
        )
    return env


async def run_jobs(
    jobs: Sequence[EpisodeJob],
    play: Callable[..., Awaitable[Episode]],
    *,
    make_env: Callable[[Any], Env],
    sampling: SamplingParams,
    concurrency: int,
    layout: str,
    env_threads: int | None = None,
    thread_name: str = "gem-env",
    on_episode: Callable[[EpisodeJob, Episode], None] | None = None,
    env_pool: Any = None,
) -> list[Episode]:
    """Play ``jobs``, up to ``concurrency`` at a time, on the running loop; the one collector.

    Each job gets an env (``make_env(job.source)``, run in a thread pool of
    ``env_threads`` threads, default ``min(concurrency, 32)``), reused by later jobs of
    the same source unless its episode failed in the env (``episode.error`` starting
    ``"env."``: it is closed instead), and is played by ``play(env, seed=job.seed,
    sampling=sampling.replace(seed=job.sampling_seed), env_id=job.env_id,
    executor=pool)`` — `run_episode` or `run_chat_episode`, partially applied. An env
    that cannot be built gives an episode flagged ``"env.make: ..."`` (of ``layout``);
    the other episodes go on. ``on_episode(job, episode)`` is called as each finishes.
    Every env is closed at the end, also when the collection is cancelled.

    ``env_pool``: where the envs come from instead of this process, e.g.
    `gem_core.distributed.RayEnvPool` (envs in Ray actors). It is bound to this
    collection with ``env_pool.bind(make_env, executor)``, which returns an object with
    this module's local pool's interface (``async acquire(source)``, ``async
    release(source, env, healthy)``, ``close()``); its envs outlive the collection when
    the pool keeps them. ``env_threads`` then defaults to ``concurrency`` (a remote env
    call only waits in its thread).

    Returns:
        The episodes, in the order of ``jobs``.
    """
    default_threads = min(concurrency, 32) if env_pool is None else concurrency
    executor = concurrent.futures.ThreadPoolExecutor(
        max_workers=env_threads or default_threads, thread_name_prefix=thread_name
    )
    pool = _EnvPool(make_env, executor) if env_pool is None else env_pool.bind(make_env, executor)
    gate = asyncio.Semaphore(concurrency)

    async def one(job: EpisodeJob) -> Episode:
        async with gate:
            try:
                env = await pool.acquire(job.source)
            except Exception as exc:
                ep = Episode(env_id=job.env_id, seed=job.seed, layout=layout, end_reason="error")
                ep.error = f"env.make: {type(exc).__name__}: {exc}"
                logger.warning("could not build env %s: %s", job.env_id, exc)
            else:
                ep = await play(
                    env,
                    seed=job.seed,
                    sampling=sampling.replace(seed=job.sampling_seed),
                    env_id=job.env_id,
                    executor=executor,
                )
                await pool.release(job.source, env, healthy=not (ep.error or "").startswith("env."))
            if on_episode is not None:
                on_episode(job, ep)
            return ep

    try:
        return list(await asyncio.gather(*(one(job) for job in jobs)))
    finally:
        try:
            await asyncio.get_running_loop().run_in_executor(executor, pool.close)
        finally:
            pool.close()  # what a cancelled wait left open (nothing after a finished close)
            executor.shutdown(wait=False, cancel_futures=True)


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
    env_pool: Any = None,
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
        env_pool: build the envs there instead of in this process, e.g.
            ``gem_core.distributed.RayEnvPool(...)`` (each episode's env in a Ray actor;
            ids and factories are sent to it, and ``env_kwargs`` with them); see
            `run_jobs`.

    Returns:
        The episodes, in the order of ``seeds``.
    """

    _check_options(layout, truncated_response)
    seeds = list(seeds)
    if isinstance(envs, str) or callable(envs):
        sources: list[EnvSource] = [envs] * len(seeds)  # type: ignore[list-item]
    else:
        sources = list(envs)
        if len(sources) != len(seeds):
            raise InvalidArgument(
                f"got {len(sources)} envs for {len(seeds)} seeds: pass one env (id or "
                "factory) for all seeds, or exactly one per seed"
            )
    check_positive_int("concurrency", concurrency)
    sampling = sampling or SamplingParams()
    jobs = [
        EpisodeJob(source, seed, derive_seed(sampling.seed, "episode", i), _source_name(source))
        for i, (source, seed) in enumerate(zip(sources, seeds, strict=True))
    ]
    play = functools.partial(
        run_episode,
        policy=policy,
        formatter=formatter,
        max_turns=max_turns,
        layout=layout,
        truncated_response=truncated_response,
        truncation_reward=truncation_reward,
        generation_timeout=generation_timeout,
    )

    def finished(job: EpisodeJob, ep: Episode) -> None:
        ep.group_id = f"{ep.env_id}/{job.seed}"
        if on_episode is not None:
            on_episode(ep)

    return await run_jobs(
        jobs,
        play,
        make_env=functools.partial(env_from_source, env_kwargs=dict(env_kwargs or {})),
        sampling=sampling,
        concurrency=concurrency,
        layout=layout,
        env_threads=env_threads,
        on_episode=finished,
        env_pool=env_pool,
    )


def collect_episodes_sync(*args: Any, **kwargs: Any) -> list[Episode]:
    """`collect_episodes` from synchronous code (runs its own event loop).

    Raises:
        RuntimeError: called from a running event loop; ``await collect_episodes(...)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(collect_episodes(*args, **kwargs))
    raise UsageError(
        "collect_episodes_sync() was called inside a running event loop; "
        "use `await collect_episodes(...)` there"
    )
