"""`RayEnvPool`: the rollout engine's envs in Ray actors, one `RemoteEnv` proxy per episode."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import pickle
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from typing import Any, NoReturn

from gem_core._closing import Closing
from gem_core.core import Env
from gem_core.distributed._ray import DEFAULT_CONNECT_TIMEOUT, connect
from gem_core.distributed.vector import actor_options, death_reason, remote_class
from gem_core.errors import (
    ClosedEnvError,
    InvalidArgument,
    WorkerError,
    WorkerTimeout,
    check_positive_int,
)
from gem_core.vector.async_vector_env import DEFAULT_TIMEOUT, _resolve_timeout, _roundtrips

__all__ = ["RayEnvPool", "RemoteEnv"]

logger = logging.getLogger(__name__)

_PICKLE = pickle.HIGHEST_PROTOCOL
_MAX_CONCURRENCY = 1000  # threads of one actor: its envs step concurrently, as in the local pool


def _raised(exc: BaseException) -> tuple[Any, ...]:
    """The reply for an exception raised by an env in the actor (call in ``except``)."""
    try:
        message = str(exc)
    except Exception:  # pragma: no cover - a broken __str__
        message = f"<unprintable {type(exc).__name__}>"
    exc.__traceback__ = None
    return ("raise", exc if _roundtrips(exc) else None, type(exc).__name__, message, traceback.format_exc())


def _reraise(reply: tuple[Any, ...], *, note: str, prefix: str) -> NoReturn:
    """Raise the exception of a `_raised` reply, its remote traceback in a note
    ``"({note}; remote traceback: ...)"``, or, when it did not travel, a `WorkerError`
    ``"{prefix}{type}: {message}"``."""
    _, exc, exc_type, message, remote_tb = reply
    if isinstance(exc, BaseException):
        if hasattr(exc, "add_note"):
            exc.add_note(f"({note}; remote traceback:\n{remote_tb.rstrip()})")
        raise exc
    raise WorkerError(
        f"{prefix}{exc_type}: {message}",
        exc_type=exc_type, remote_message=message, remote_traceback=remote_tb,
    )


class _EnvHost:
    """The body of one pool actor: envs by slot number, each used by one episode at a time.

    Every reply is pickled here: a result that cannot be pickled is an error reply for
    that call only (its env is then dropped by the pool), not a Ray error.
    """

    def __init__(self) -> None:
        self.envs: dict[int, Env] = {}
        self.slots = itertools.count()
        self.lock = threading.Lock()

    def info(self) -> tuple[int, str]:
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def make(self, make_env: Callable[[Any], Env], source: Any) -> bytes:
        try:
            env = make_env(source)
            if not isinstance(env, Env):
                raise InvalidArgument(
                    f"the pool's make_env({source!r}) returned {type(env).__name__}, not a gem_core.Env"
                )
        except Exception as exc:
            return pickle.dumps(_raised(exc), _PICKLE)
        with self.lock:
            slot = next(self.slots)
            self.envs[slot] = env
        spec = getattr(env, "spec", None)
        return pickle.dumps(("ok", slot, getattr(spec, "id", None)), _PICKLE)

    def call(self, slot: int, method: str, args: tuple, kwargs: dict[str, Any]) -> bytes:
        env = self.envs.get(slot)
        if env is None:
            return pickle.dumps(("gone",), _PICKLE)
        try:
            result = getattr(env, method)(*args, **kwargs)
        except Exception as exc:
            return pickle.dumps(_raised(exc), _PICKLE)
        try:
            return pickle.dumps(("ok", result), _PICKLE)
        except Exception as exc:
            return pickle.dumps(("unpicklable", type(exc).__name__, str(exc)), _PICKLE)

    def drop(self, slot: int) -> None:
        env = self.envs.pop(slot, None)
        if env is not None:
            try:
                env.close()
            except Exception as exc:  # pragma: no cover
                logger.warning("closing %s raised %s: %s", env, type(exc).__name__, exc)

    def close_all(self) -> None:
        for slot in list(self.envs):
            self.drop(slot)


class _Actor:
    """The pool's record of one actor."""

    __slots__ = ("aid", "handle", "pid", "node", "in_use", "dead", "ready")

    def __init__(self, aid: int, handle: Any):
        self.aid = aid
        self.handle = handle
        self.pid: int | None = None
        self.node: str | None = None
        self.in_use = 0  # envs of this actor held by an episode now
        self.dead: str | None = None
        self.ready: Any = None  # the info() call, until it answered

    @property
    def label(self) -> str:
        node = "?" if self.node is None else self.node[:8]
        return f"env actor {self.aid} (pid {self.pid}, node {node})"


class RemoteEnv(Env):
    """A proxy of one env living in a `RayEnvPool` actor.

    ``reset`` and ``step`` block the calling thread until the actor answers (the rollout
    engine calls them in its thread pool, so the event loop is not blocked), for at most
    the pool's ``timeout`` seconds.

    Errors (each ends only this episode; the env is then dropped by the pool):
        - the env raised: the same exception (with the actor's traceback as a note), or a
          `WorkerError` when it does not pickle;
        - its actor died (killed, its node lost): `WorkerError` with
          ``exc_type="WorkerDied"``;
        - no answer in time: `WorkerTimeout`;
        - a result that cannot be pickled: `WorkerError` with ``exc_type`` the pickling error.
    """

    blocking_calls = True  # every call waits for the actor: never on the event loop (gem_core.rl.env_calls)

    def __init__(self, pool: RayEnvPool, actor: _Actor, slot: int, spec_id: str | None):
        self._pool = pool
        self._actor = actor
        self._slot = slot
        self.spec_id = spec_id
        self.broken = False
        if spec_id is not None:  # so that episodes record the env id, as with a local env
            try:
                from gem_core.registration import spec

                self.spec = spec(spec_id)
            except Exception:  # an id registered only where the actor runs
                pass

    @property
    def actor_label(self) -> str:
        return self._actor.label

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        return self._call("reset", (), {"seed": seed, "options": options})

    def step(self, action: Any):  # type: ignore[override]
        return self._call("step", (action,), {})

    def close(self) -> None:
        """Nothing to do: the pool owns the remote env (reused or dropped on release)."""

    def __repr__(self) -> str:
        return f"RemoteEnv({self.spec_id or '?'}, slot {self._slot} on {self._actor.label})"

    def _call(self, method: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        pool, actor = self._pool, self._actor
        ray = pool._ray
        where = f"{method}() of {self!r}"
        if actor.dead is not None:
            self.broken = True
            raise self._died(method, actor.dead)
        try:
            ref = actor.handle.call.remote(self._slot, method, args, kwargs)
        except Exception as exc:
            self.broken = True
            raise InvalidArgument(
                f"{where}: the arguments could not be sent to the actor ({type(exc).__name__}: "
                f"{exc}); actions, seeds and options must be picklable"
            ) from exc
        try:
            payload = ray.get(ref, timeout=pool.timeout)
        except ray.exceptions.GetTimeoutError:
            self.broken = True
            raise WorkerTimeout(
                f"{where} did not answer within {pool.timeout:g} s; the episode is ended and the env "
                "dropped (raise RayEnvPool(timeout=...) for slower envs)"
            ) from None
        except Exception as exc:  # the actor is gone (killed, node lost, ...)
            self.broken = True
            pool._actor_died(actor, death_reason(exc))
            raise self._died(method, actor.dead or death_reason(exc)) from None
        reply = pickle.loads(payload)
        kind = reply[0]
        if kind == "ok":
            return reply[1]
        self.broken = True
        if kind == "raise":
            _reraise(reply, note=f"raised in {where}", prefix=f"{where} raised ")
        if kind == "unpicklable":
            _, exc_type, message = reply
            raise WorkerError(
                f"the result of {where} could not be pickled to send it back from the actor "
                f"({exc_type}: {message}); observations and infos must be plain data (str, "
                "numbers, lists, dicts, bytes, numpy arrays). The episode is ended.",
                exc_type=exc_type, remote_message=message,
            )
        raise WorkerError(f"{where}: the actor no longer holds this env", exc_type="EnvGone")

    def _died(self, method: str, reason: str) -> WorkerError:
        return WorkerError(
            f"{self._actor.label} {reason} during {method}(); this episode's env was lost. The "
            "pool starts a fresh actor for later episodes.",
            exc_type="WorkerDied", remote_message=reason,
        )


def _make_key(make_env: Callable[[Any], Any]) -> Hashable:
    """Equal for two ``make_env`` that build the same envs (e.g. equal partials)."""
    if isinstance(make_env, functools.partial):
        try:
            return pickle.dumps(make_env, _PICKLE)
        except Exception:
            pass
    return id(make_env)


class RayEnvPool(Closing):
    """Envs for the rollout engine, living in Ray actors; pass it as ``env_pool=``.

    ``collect_episodes(..., env_pool=RayEnvPool(num_actors=8))`` plays every episode
    against an env built *in an actor* (``gem_core.make(env_id, **env_kwargs)`` or the
    factory, run there) through a `RemoteEnv` proxy; the policy stays where it is. Each
    actor hosts many envs (each used by one episode at a time; their steps run in the
    actor's threads), so ``num_actors`` bounds processes, not episodes: episodes go to
    the actor with the fewest running episodes, actors are started lazily up to
    ``num_actors``. As with the local pool, an env whose episode ended normally is reused
    by a later episode of the same source (in this or a later collection); one whose
    episode failed in the env (``episode.error`` starting ``"env."``) is dropped.

    Sandboxes follow their envs: an env that runs code builds its sandbox pool in the
    actor's process, on that actor's node. Only pickled plain data crosses the wire.

    Failures: an actor that dies (``ray.kill``, a crash, its node removed) ends the
    episodes whose env it held (``"env.step: WorkerError: ... died ..."``); the other
    episodes go on, and the next episodes get a fresh actor (``restarts`` counts them),
    wherever Ray finds room. A call that does not answer within ``timeout`` ends its
    episode with `WorkerTimeout` (the env is dropped; a hung env keeps one of its
    actor's threads).

    Args:
        num_actors: the most actors at once (default: the cluster's CPUs / ``num_cpus``
            per actor, at least 1).
        ray_options: options of each actor (see `RayVectorEnv`), default ``{"num_cpus": 1}``.
        timeout: seconds one env call (make, reset, step) may take.
        address, connect_timeout: the cluster (`gem_core.distributed.connect`).

    Attributes:
        restarts: actors that died and were replaced.
        built: envs built so far (a reused env is built once).
        actors: the live actor handles.
    """

    def __init__(
        self,
        num_actors: int | None = None,
        *,
        ray_options: Mapping[str, Any] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        address: str | None = None,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    ):
        check_positive_int("num_actors", num_actors, allow_none=True)
        self.timeout = _resolve_timeout(timeout, "timeout")
        self._options = {"max_concurrency": _MAX_CONCURRENCY, **actor_options(ray_options)}
        self._ray = connect(address, timeout=connect_timeout)
        if num_actors is None:
            per = self._options.get("num_cpus", 1) or 0
            cpus = float(self._ray.cluster_resources().get("CPU", 1.0))
            num_actors = max(1, int(cpus // per)) if per > 0 else max(1, int(cpus))
        self.num_actors = num_actors
        self.restarts = 0
        self.built = 0
        self.closed = False
        self._cls = remote_class(_EnvHost, self._ray)
        self._ids = itertools.count()
        self._actors: list[_Actor] = []
        self._free: dict[Hashable, list[RemoteEnv]] = {}
        self._lock = threading.Lock()

    @property
    def actors(self) -> list[Any]:
        return [a.handle for a in self._actors if a.dead is None]

    def __repr__(self) -> str:
        live = sum(a.dead is None for a in self._actors)
        return f"RayEnvPool(num_actors={self.num_actors}, live={live}, restarts={self.restarts})"

    def bind(self, make_env: Callable[[Any], Env], executor: Any) -> _PoolSession:
        """The session `gem_core.rl.collect.run_jobs` uses for one collection."""
        if self.closed:
            raise ClosedEnvError(f"{self!r} is closed; build a new RayEnvPool")
        return _PoolSession(self, make_env)

    @contextlib.asynccontextmanager
    async def env(self, source: Any, *, env_kwargs: Mapping[str, Any] | None = None) -> AsyncIterator[RemoteEnv]:
        """One episode's env, for code that plays its own episodes (an adapter's agent loop).

        ``async with pool.env("game:GuessTheNumber-v0-easy") as env: await
        run_episode(env, policy, formatter, seed=...)`` — the env is built (or reused) in an
        actor, given back for reuse after a clean episode, dropped after an env error.

        Args:
            source: an env id (``gem_core.make(source, **env_kwargs)`` in the actor) or a
                zero-argument factory.
            env_kwargs: constructor kwargs (env ids only).
        """
        from gem_core.rl.collect import env_from_source

        session = self.bind(functools.partial(env_from_source, env_kwargs=dict(env_kwargs or {})), None)
        env = await session.acquire(source)
        assert isinstance(env, RemoteEnv)
        healthy = False
        try:
            yield env
            healthy = True
        finally:
            await session.release(source, env, healthy)

    def close(self) -> None:
        """Kill every actor (their envs with them). Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        ray = self._ray
        with self._lock:
            actors, self._actors = self._actors, []
            self._free.clear()
        live = [a for a in actors if a.dead is None]
        try:
            if ray.is_initialized() and live:
                refs = [a.handle.close_all.remote() for a in live]
                ray.wait(refs, num_returns=len(refs), timeout=5.0)
                for a in live:
                    ray.kill(a.handle, no_restart=True)
        except Exception:  # pragma: no cover - a cluster already gone
            pass
        for a in actors:
            a.dead = a.dead or "closed"

    # --- internals ---------------------------------------------------------------------------
    def _actor_died(self, actor: _Actor, reason: str) -> None:
        with self._lock:
            if actor.dead is not None:
                return
            actor.dead = reason
            self.restarts += 1
            if actor in self._actors:
                self._actors.remove(actor)
            for envs in self._free.values():
                envs[:] = [e for e in envs if e._actor is not actor]
        try:
            self._ray.kill(actor.handle, no_restart=True)
        except Exception:
            pass
        logger.warning("%s %s; its episodes are lost, a fresh actor takes later ones", actor.label, reason)

    def _pick_actor(self) -> _Actor:
        with self._lock:
            live = [a for a in self._actors if a.dead is None]
            if len(live) < self.num_actors and all(a.in_use for a in live):
                actor = _Actor(next(self._ids), self._cls.options(**self._options).remote())
                actor.ready = actor.handle.info.remote()
                self._actors.append(actor)
            else:
                actor = min(live, key=lambda a: a.in_use)
            actor.in_use += 1
            return actor

    def _take_free(self, key: Hashable) -> RemoteEnv | None:
        with self._lock:
            envs = self._free.get(key)
            while envs:
                env = envs.pop()
                if env._actor.dead is None:
                    env._actor.in_use += 1
                    return env
        return None

    def _give_back(self, key: Hashable, env: RemoteEnv, healthy: bool) -> None:
        actor = env._actor
        with self._lock:
            actor.in_use -= 1
            if healthy and not env.broken and actor.dead is None and not self.closed:
                self._free.setdefault(key, []).append(env)
                return
        if actor.dead is None and not self.closed:
            try:
                actor.handle.drop.remote(env._slot)
            except Exception:  # pragma: no cover
                pass


async def _await_ref(ref: Any, timeout: float | None) -> Any:
    return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout)


class _PoolSession:
    """One collection's view of a `RayEnvPool` (the interface of the local pool)."""

    def __init__(self, pool: RayEnvPool, make_env: Callable[[Any], Env]):
        self.pool = pool
        self.make_env = make_env
        self.make_key = _make_key(make_env)
        self.held: set[RemoteEnv] = set()

    def _key(self, source: Any) -> Hashable:
        return (source if isinstance(source, str) else id(source), self.make_key)

    async def acquire(self, source: Any) -> Env:
        pool = self.pool
        env = pool._take_free(self._key(source))
        if env is None:
            actor = pool._pick_actor()
            try:
                if actor.ready is not None:
                    actor.pid, actor.node = await _await_ref(actor.ready, pool.timeout)
                    actor.ready = None
                payload = await _await_ref(actor.handle.make.remote(self.make_env, source), pool.timeout)
            except BaseException as exc:
                with pool._lock:
                    actor.in_use -= 1
                if isinstance(exc, asyncio.TimeoutError):
                    raise WorkerTimeout(
                        f"{actor.label} did not build an env for {source!r} within {pool.timeout:g} s "
                        f"(an actor waits until a node has the resources it asks for, "
                        f"{pool._options!r}; `ray status` shows what the cluster has)"
                    ) from None
                if isinstance(exc, Exception) and not isinstance(exc, InvalidArgument):
                    pool._actor_died(actor, death_reason(exc))
                    raise WorkerError(
                        f"{actor.label} {actor.dead} while building an env for {source!r}",
                        exc_type="WorkerDied", remote_message=str(actor.dead),
                    ) from None
                raise
            reply = pickle.loads(payload)
            if reply[0] != "ok":
                with pool._lock:
                    actor.in_use -= 1
                _reraise(
                    reply,
                    note=f"raised while {actor.label} built the env",
                    prefix=f"{actor.label} could not build an env for {source!r}: ",
                )
            env = RemoteEnv(pool, actor, reply[1], reply[2])
            pool.built += 1
        self.held.add(env)
        return env

    async def release(self, source: Any, env: Env, healthy: bool) -> None:
        assert isinstance(env, RemoteEnv)
        self.held.discard(env)
        self.pool._give_back(self._key(source), env, healthy)

    def close(self) -> None:
        """Drop the envs still held by an episode (a cancelled collection); the pool's
        free envs stay for the next collection. Safe to call again."""
        while self.held:
            try:
                env = self.held.pop()
            except KeyError:  # emptied by a concurrent close
                break
            self.pool._give_back(None, env, healthy=False)
