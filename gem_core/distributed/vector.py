"""`RayVectorEnv`: sub-envs sharded over Ray actors, with the contract of `AsyncVectorEnv`."""

from __future__ import annotations

import math
import os
import pickle
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.distributed._ray import DEFAULT_CONNECT_TIMEOUT, connect
from gem_core.errors import InvalidArgument, WorkerError
from gem_core.vector.async_vector_env import (
    DEFAULT_TIMEOUT,
    AsyncState,
    AsyncVectorEnv,
    _fatal,
    _resolve_timeout,
    _Worker,
)
from gem_core.vector.batch import SubEnvBatch
from gem_core.vector.vector_env import (
    AutoresetMode,
    VectorEnv,
    check_built_env,
    check_env_fns,
    describe_env_fns,
)

__all__ = ["RayVectorEnv", "actor_options", "DEFAULT_ACTOR_OPTIONS"]

DEFAULT_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 1}
"""Resources of one env actor unless ``ray_options`` says otherwise."""

_CLOSE_GRACE_S = 5.0
_PICKLE = pickle.HIGHEST_PROTOCOL
# Restarts are ours (a fresh actor, its sub-envs reset); Ray's own would hide a death.
_REFUSED = ("max_restarts", "max_task_retries")


def actor_options(ray_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``DEFAULT_ACTOR_OPTIONS`` updated with ``ray_options`` (the kwargs of
    ``ActorClass.options``: ``num_cpus``, ``resources={"gem_env": 1}``,
    ``scheduling_strategy``, ``runtime_env``, ...), checked. The env modules of
    `gem_core.use_env_modules` go into the actor's ``runtime_env`` ``env_vars``, so that
    its envs' ids are known on any node (the caller's own ``env_vars`` win)."""
    return _with_env_modules(_checked_options(ray_options))


def _with_env_modules(options: dict[str, Any]) -> dict[str, Any]:
    from gem_core.env_modules import env_module_vars, ray_runtime_env

    if env_module_vars():
        options["runtime_env"] = ray_runtime_env(options.get("runtime_env"))
    return options


def _checked_options(ray_options: Mapping[str, Any] | None) -> dict[str, Any]:
    if ray_options is None:
        return dict(DEFAULT_ACTOR_OPTIONS)
    if not isinstance(ray_options, Mapping):
        raise InvalidArgument(
            f"ray_options must be a dict of Ray actor options (e.g. {{'num_cpus': 1, "
            f"'resources': {{'gem_env': 1}}}}), got {type(ray_options).__name__}"
        )
    refused = sorted(set(ray_options) & set(_REFUSED))
    if refused:
        raise InvalidArgument(
            f"ray_options may not set {', '.join(refused)}: gem_core restarts a dead env actor "
            "itself (its episodes are reported lost and its envs reset); Ray's silent restart "
            "would hide the loss. Remove the option."
        )
    return {**DEFAULT_ACTOR_OPTIONS, **ray_options}


def _node_id() -> str:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # pragma: no cover - outside an actor
        return "?"


class _ShardHost:
    """The body of one env actor: a `SubEnvBatch` answering pickled commands.

    Replies are pickled here, not by Ray: a result that cannot be pickled becomes a
    ``"fatal"`` reply (the driver replaces the actor) instead of a Ray error.
    """

    def __init__(self, env_fns: list[Callable[[], Env]], offset: int, mode: AutoresetMode):
        self.fatal: tuple[Any, ...] | None = None
        self.batch: SubEnvBatch | None = None
        envs: list[Env] = []
        try:
            for k, fn in enumerate(env_fns):
                envs.append(check_built_env(fn(), offset + k, "RayVectorEnv"))
        except Exception as e:
            for env in envs:
                try:
                    env.close()
                except Exception:
                    pass
            self.fatal = _fatal(e)
            return
        self.batch = SubEnvBatch(envs, offset, mode)
        self.offset = offset

    def ready(self) -> bytes:
        if self.fatal is not None:
            return pickle.dumps(self.fatal, _PICKLE)
        return pickle.dumps(("ready", os.getpid(), _node_id()), _PICKLE)

    def handle(self, payload: bytes) -> bytes:
        command, data = pickle.loads(payload)
        batch = self.batch
        assert batch is not None
        if command == "step":
            reply: tuple[Any, ...] = ("ok", batch.step(*data))
        elif command == "reset":
            reply = ("ok", batch.reset(*data))
        else:
            name, args, kwargs, get_only = data
            try:
                reply = ("ok", batch.call(name, args, kwargs, get_only=get_only))
            except WorkerError as e:
                e.__cause__ = None  # the cause may not pickle; the traceback text is kept
                reply = ("error", e)
        try:
            return pickle.dumps(reply, _PICKLE)
        except Exception as e:
            if command != "call":  # a step or reset happened that cannot be reported
                return pickle.dumps(_fatal(e), _PICKLE)
            n = len(batch.envs)
            return pickle.dumps(("error", WorkerError(
                f"the results of {'get_attr' if data[3] else 'call'}({data[0]!r}) on sub-envs "
                f"{self.offset}-{self.offset + n - 1} could not be pickled to send them back: "
                f"{type(e).__name__}: {e}",
                exc_type=type(e).__name__,
                remote_message=str(e),
            )), _PICKLE)

    def close(self) -> None:
        if self.batch is not None:
            self.batch.close()


_ACTOR_CLASSES: dict[str, Any] = {}


def remote_class(cls: type, ray: Any) -> Any:
    """``ray.remote(cls)``, made once per process."""
    actor = _ACTOR_CLASSES.get(cls.__qualname__)
    if actor is None:
        actor = _ACTOR_CLASSES[cls.__qualname__] = ray.remote(cls)
    return actor


def death_reason(exc: BaseException) -> str:
    """A short text for a Ray error that means the actor is gone."""
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    if len(first) > 300:
        first = first[:300] + "..."
    return f"died ({type(exc).__name__}: {first})" if first else f"died ({type(exc).__name__})"


class _ActorWorker(_Worker):
    """`_Worker` with a Ray actor in ``process`` and its pending call in ``conn``."""

    __slots__ = ("pid", "node")

    def __init__(self, wid: int, start: int, stop: int, env_fns: list[Callable[[], Env]]):
        super().__init__(wid, start, stop, env_fns)
        self.pid: int | None = None
        self.node: str | None = None

    @property
    def label(self) -> str:
        node = "?" if self.node is None else self.node[:8]
        return f"worker {self.wid} (Ray actor, pid {self.pid}, node {node}, sub-envs {self.start}-{self.stop - 1})"


def _shutdown_actors(ray: Any, workers: list[_ActorWorker], grace: float) -> None:
    """Ask idle actors to close their sub-envs (up to ``grace`` s), then kill every actor."""
    try:
        if not ray.is_initialized():
            return
        closing = []
        for w in workers:
            if w.process is not None and w.dead is None and not w.busy:
                try:
                    closing.append(w.process.close.remote())
                except Exception:
                    pass
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=grace)
        for w in workers:
            if w.process is not None and w.dead is None:
                try:
                    ray.kill(w.process, no_restart=True)
                except Exception:
                    pass
    except Exception:  # never raise from close or a finaliser
        pass
    finally:
        for w in workers:
            w.busy = False
            w.conn = None
            if w.dead is None:
                w.dead = "closed"


class RayVectorEnv(AsyncVectorEnv):
    """Sub-envs stepped in parallel by Ray actors, each holding a contiguous shard.

    The multi-node `AsyncVectorEnv`: each worker is a Ray actor instead of a local
    process, placed by Ray's scheduler anywhere in the cluster (``ray_options``), and
    everything else — autoreset modes, partial stepping, seeds, ``on_error``, the
    `AsyncState` machine, a timeout on every wait, `WorkerError` with the remote
    traceback, a dead actor detected and replaced with its in-flight episodes ended
    (``info["error"]``, ``exc_type="WorkerDied"``) and the others going on — is
    `AsyncVectorEnv`'s own code: the same per-env rules (`SubEnvBatch`) run in the
    actor. Commands and results are pickled by gem_core (a result that cannot be
    pickled replaces the actor, as with a process worker); factories are sent by Ray
    (cloudpickle: lambdas work), and must import on every node (install gem_core
    and the envs' extras there).

    A call costs one Ray actor call per worker (about 0.5-1 ms each on one machine, more
    across nodes): use it when a step costs far more than that (code tests, sandboxed
    tools, simulators) or when one machine's CPUs are not enough.

    Args:
        env_fns: one factory per sub-env; called inside the actors.
        autoreset_mode: see `AutoresetMode`.
        num_workers: actors; default ``min(num_envs, CPUs of the cluster / num_cpus per
            actor)``. Shards as in `AsyncVectorEnv`.
        timeout: default seconds for every wait, actor start-up included (an actor that
            asks for resources no node has waits for them: it times out here).
        on_error: ``"report"`` or ``"raise"``; see `VectorEnv`.
        ray_options: options of each actor (``ActorClass.options``), default
            ``{"num_cpus": 1}``; e.g. ``{"num_cpus": 2, "resources": {"gem_env": 1}}`` to
            land on nodes started with ``ray start --resources='{"gem_env": 8}'``.
            ``max_restarts``/``max_task_retries`` are refused (restarts are ours).
        address: the cluster (`gem_core.distributed.connect`); ignored when this process
            is connected already (a trainer's ``ray.init``).
        connect_timeout: seconds to wait for ``address``.

    Attributes:
        actors: the live actor handles (``None`` for a dead one not yet replaced).
        worker_nodes: the Ray node id of each actor.
        restarts, num_workers, timeout: as in `AsyncVectorEnv`; ``context`` is ``"ray"``.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        num_workers: int | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        on_error: str = "report",
        ray_options: Mapping[str, Any] | None = None,
        address: str | None = None,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    ):
        fns = check_env_fns(env_fns, "RayVectorEnv")
        VectorEnv.__init__(self, len(fns), autoreset_mode=autoreset_mode, on_error=on_error)
        self.closed = True  # until the actors are up
        n = self.num_envs
        self.timeout = _resolve_timeout(timeout, "timeout")
        self._options = actor_options(ray_options)
        if num_workers is not None and (
            isinstance(num_workers, bool) or not isinstance(num_workers, int) or not 1 <= num_workers <= n
        ):
            raise InvalidArgument(
                f"num_workers must be an int in [1, num_envs={n}] or None (one per actor's "
                f"share of the cluster's CPUs), got {num_workers!r}"
            )
        ray = self._ray = connect(address, timeout=connect_timeout)
        if num_workers is None:
            num_workers = _default_num_actors(ray, n, self._options)
        self.context = "ray"
        self.num_workers = num_workers
        self.restarts = 0
        self._label = describe_env_fns(fns)
        self._actor_cls = remote_class(_ShardHost, ray)
        bounds = [k * n // num_workers for k in range(num_workers + 1)]
        self._workers = [
            _ActorWorker(k, bounds[k], bounds[k + 1], fns[bounds[k] : bounds[k + 1]])
            for k in range(num_workers)
        ]
        self._worker_of = [w for w in self._workers for _ in range(w.start, w.stop)]
        self._needs_reset = [True] * n
        self._lost: dict[int, WorkerError] = {}
        self._state = AsyncState.DEFAULT
        self._plan: Any = None
        self._awaiting: list[_ActorWorker] = []
        self._replies: dict[int, tuple[Any, ...]] = {}
        self._finalizer = weakref.finalize(self, _shutdown_actors, ray, self._workers, _CLOSE_GRACE_S)
        try:
            for w in self._workers:
                self._start(w)
            self._await_ready(self._workers)
        except BaseException:
            self._finalizer()
            raise
        self.closed = False

    # --- public ----------------------------------------------------------------------------
    @property
    def worker_pids(self) -> list[int | None]:
        """The pid of each actor's process (on its node; ``None`` for a dead one)."""
        return [None if w.dead is not None else w.pid for w in self._workers]

    @property
    def actors(self) -> list[Any]:
        """The actor handle of each worker (``None`` for a dead one not yet replaced)."""
        return [None if w.dead is not None else w.process for w in self._workers]

    @property
    def worker_nodes(self) -> list[str | None]:
        """The Ray node id each actor runs on (``None`` for a dead one)."""
        return [None if w.dead is not None else w.node for w in self._workers]

    def __repr__(self) -> str:
        state = ", closed" if self.closed else ""
        return (
            f"RayVectorEnv({self._label}, num_envs={self.num_envs}, "
            f"num_workers={getattr(self, 'num_workers', '?')}, "
            f"autoreset_mode={self.autoreset_mode.name}{state})"
        )

    __str__ = __repr__

    # --- the transport: actors instead of processes and pipes ----------------------------
    def _start(self, w: _ActorWorker) -> None:  # type: ignore[override]
        try:
            actor = self._actor_cls.options(**self._options).remote(w.env_fns, w.start, self.autoreset_mode)
        except (TypeError, ValueError) as e:
            raise InvalidArgument(
                f"RayVectorEnv could not start the actor of sub-envs {w.start}-{w.stop - 1}: "
                f"{type(e).__name__}: {e} (check ray_options={self._options!r} and that the "
                "factories can be serialised)"
            ) from e
        w.process, w.conn, w.busy, w.dead, w.pid, w.node = actor, actor.ready.remote(), True, None, None, None

    def _dispatch(self, messages: list[tuple[Any, Any, Any]], state: AsyncState, plan: Any) -> None:
        try:
            payloads = [pickle.dumps(message, _PICKLE) for _, _, message in messages]
        except Exception as e:
            raise InvalidArgument(
                f"{state.value}: the arguments could not be pickled to send to the Ray actors "
                f"({type(e).__name__}: {e}); actions, seeds and options must be picklable. "
                "Nothing was sent."
            ) from e
        for (w, _, _), payload in zip(messages, payloads, strict=True):
            if w.dead is not None:
                continue
            try:
                w.conn = w.process.handle.remote(payload)
            except Exception as e:  # the actor handle is unusable: the wait reports it
                self._bury(w, death_reason(e))
            else:
                w.busy = True
        self._plan = plan
        self._awaiting = [w for w, _, _ in messages]
        self._replies = {}
        self._state = state

    def _collect(self, awaiting: list[Any], replies: dict[int, tuple[Any, ...]],
                 timeout: float | None, what: str) -> None:
        ray = self._ray
        deadline = None if timeout is None else _monotonic() + timeout
        while awaiting:
            for w in list(awaiting):
                if w.dead is not None:
                    replies[w.wid] = ("dead", w.dead)
                    awaiting.remove(w)
            if not awaiting:
                break
            remaining = None if deadline is None else max(0.0, deadline - _monotonic())
            by_ref = {w.conn: w for w in awaiting}
            ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=remaining)
            for ref in ready:
                w = by_ref[ref]
                replies[w.wid] = self._read(w)
                awaiting.remove(w)
            if awaiting and deadline is not None and _monotonic() >= deadline:
                self._raise_timeout(awaiting, timeout, what)

    def _read(self, w: _ActorWorker) -> tuple[Any, ...]:  # type: ignore[override]
        ray = self._ray
        try:
            message = pickle.loads(ray.get(w.conn))
        except Exception as e:  # RayActorError, ActorDiedError, a node lost, ...
            self._bury(w, death_reason(e))
            return ("dead", w.dead)
        w.conn = None
        if message[0] == "fatal":
            _, _, exc_type, text, _ = message
            self._bury(w, f"failed with {exc_type}: {text}")
            return ("dead", w.dead, message)
        w.busy = False
        if message[0] == "ready":
            w.pid, w.node = message[1], message[2]
        return message

    def _bury(self, w: _ActorWorker, reason: str | None, grace: float = 1.0) -> None:  # type: ignore[override]
        try:
            self._ray.kill(w.process, no_restart=True)
        except Exception:
            pass
        w.conn = None
        w.busy = False
        w.dead = reason or "died"

    def _raise_timeout(self, awaiting: list[Any], timeout: float | None, what: str) -> None:
        from gem_core.errors import WorkerTimeout

        late = "; ".join(w.label for w in awaiting)
        if what == "start":
            fix = (
                f"an actor waits until a node has the resources it asks for "
                f"({self._options!r}; `ray status` shows what the cluster has), or its envs are "
                "slow to build: raise RayVectorEnv(timeout=...)"
            )
        else:
            fix = (
                f"call {what}_wait() again to keep waiting, or close() the vector env "
                "(it kills busy actors)"
            )
        raise WorkerTimeout(f"{self!r}: {what} timed out after {timeout:g} s waiting for {late}; {fix}")


def _monotonic() -> float:
    import time

    return time.monotonic()


def _default_num_actors(ray: Any, num_envs: int, options: Mapping[str, Any]) -> int:
    per_actor = options.get("num_cpus", 1) or 0
    try:
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
    except Exception:  # pragma: no cover
        cpus = 1.0
    fit = num_envs if per_actor <= 0 else int(cpus // per_actor)
    return max(1, min(num_envs, fit if math.isfinite(fit) else num_envs))
