"""`AsyncVectorEnv`: sub-envs sharded over worker processes, one message per worker per call."""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import select
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from enum import Enum
from multiprocessing import connection as mp_connection
from multiprocessing import util as mp_util
from multiprocessing.reduction import ForkingPickler
from typing import Any

from gem_core.core import Env
from gem_core.errors import (
    AlreadyPendingCallError,
    InvalidArgument,
    NoAsyncCallError,
    WorkerError,
    WorkerTimeout,
)
from gem_core.vector.batch import SubEnvBatch
from gem_core.vector.vector_env import (
    AutoresetMode,
    ResetReturn,
    StepReturn,
    VectorEnv,
    build_envs,
    check_built_env,
    check_env_fns,
    describe_env_fns,
    scatter_reset,
    scatter_step,
    step_arrays,
)

__all__ = ["AsyncVectorEnv", "AsyncState", "DEFAULT_TIMEOUT", "DEFAULT_BUSY_POLL"]

DEFAULT_TIMEOUT = 300.0
"""Seconds a wait lasts by default (``AsyncVectorEnv(timeout=...)``)."""

DEFAULT_BUSY_POLL = 200e-6
"""Seconds each side busy-polls for the other before it sleeps, by default."""

_CLOSE_GRACE_S = 5.0
_PROTOCOL = pickle.HIGHEST_PROTOCOL
_CLOSE_MSG = pickle.dumps(("close", None), _PROTOCOL)


class AsyncState(Enum):
    """What an `AsyncVectorEnv` is waiting for."""

    DEFAULT = "default"
    WAITING_RESET = "reset"
    WAITING_STEP = "step"
    WAITING_CALL = "call"
    CLOSED = "closed"


# ------------------------------------------------------------------------------- the worker


def _roundtrips(exc: BaseException) -> bool:
    """Whether ``exc`` survives pickling with the same type and message."""
    try:
        copy = ForkingPickler.loads(ForkingPickler.dumps(exc))
    except Exception:
        return False
    return type(copy) is type(exc) and str(copy) == str(exc)


def _fatal(exc: BaseException) -> tuple[Any, ...]:
    """The message a worker sends before it exits on an error of its own."""
    try:
        message = str(exc)
    except Exception:  # pragma: no cover - a broken __str__
        message = f"<unprintable {type(exc).__name__}>"
    return ("fatal", exc if _roundtrips(exc) else None, type(exc).__name__, message, traceback.format_exc())


def _worker_main(
    conn: Any,
    parent_conn: Any,
    env_fns: list[Callable[[], Env]],
    offset: int,
    mode: AutoresetMode,
    spin_s: float = 0.0,
) -> None:
    """A worker process: build the shard, then answer one message per command."""
    parent_conn.close()  # so that the main process dying reads as EOF here
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    # close() ends a busy worker with SIGTERM: a handler inherited from the parent (a Ray
    # node's "drain for 30 s", a server framework's) would hold it until the SIGKILL.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    envs: list[Env] = []
    try:
        for k, fn in enumerate(env_fns):
            envs.append(check_built_env(fn(), offset + k, "AsyncVectorEnv"))
    except Exception as e:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass
        conn.send(_fatal(e))
        conn.close()
        return
    batch = SubEnvBatch(envs, offset, mode)
    conn.send(("ready", os.getpid()))
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    clock = time.perf_counter
    try:
        while True:
            if spin_s:
                # Busy-poll a short while before sleeping in recv(): waking a sleeping
                # process on another CPU costs tens of microseconds, a cheap env's step one.
                end = clock() + spin_s
                while not poller.poll(0) and clock() < end:
                    pass
            try:
                command, data = conn.recv()
            except (EOFError, OSError):  # the main process is gone
                break
            if command == "close":
                break
            reply = _answer(batch, command, data)
            try:
                # Pickled first, so a failure leaves the pipe clean. Plain pickle: replies
                # hold no multiprocessing objects, and ForkingPickler costs microseconds more.
                conn.send_bytes(pickle.dumps(reply, _PROTOCOL))
            except Exception as e:  # a result that cannot be pickled
                if command != "call":  # a step or reset happened that cannot be reported
                    conn.send(_fatal(e))
                    break
                conn.send(("error", WorkerError(
                    f"the results of {'get_attr' if data[3] else 'call'}({data[0]!r}) on sub-envs "
                    f"{offset}-{offset + len(envs) - 1} could not be pickled to send them back: "
                    f"{type(e).__name__}: {e}",
                    exc_type=type(e).__name__,
                    remote_message=str(e),
                )))
    finally:
        batch.close()
        conn.close()


def _answer(batch: SubEnvBatch, command: str, data: Any) -> tuple[Any, ...]:
    """The reply to one command, in a worker process or for the local shard."""
    if command == "step":
        return ("ok", batch.step(*data))
    if command == "reset":
        return ("ok", batch.reset(*data))
    if command == "call":
        name, args, kwargs, get_only = data
        try:
            return ("ok", batch.call(name, args, kwargs, get_only=get_only))
        except WorkerError as e:
            e.__cause__ = None  # the cause may not pickle; the traceback text is kept
            return ("error", e)
    raise RuntimeError(f"unknown command {command!r}")  # pragma: no cover - a protocol bug


def _exit_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name}"
    return f"exited with code {exitcode}"


class _Worker:
    """The main process's record of one worker process and its shard ``[start, stop)``."""

    __slots__ = ("wid", "start", "stop", "env_fns", "process", "conn", "busy", "dead", "batch", "message")

    def __init__(self, wid: int, start: int, stop: int, env_fns: list[Callable[[], Env]]):
        self.wid = wid
        self.start = start
        self.stop = stop
        self.env_fns = env_fns
        self.process: Any = None
        self.conn: Any = None
        self.busy = False  # a command was sent and its reply not read yet
        self.dead: str | None = None  # why the worker is gone (None while it runs)
        self.batch: SubEnvBatch | None = None  # the local shard's envs (``local_shard=True``)
        self.message: Any = None  # the local shard's pending command

    @property
    def label(self) -> str:
        if self.batch is not None:
            return f"the local shard (pid {os.getpid()}, sub-envs {self.start}-{self.stop - 1})"
        pid = getattr(self.process, "pid", None)
        return f"worker {self.wid} (pid {pid}, sub-envs {self.start}-{self.stop - 1})"


def _stop_process(process: Any, grace: float) -> None:
    process.join(grace)
    if process.is_alive():
        process.terminate()
        process.join(1.0)
    if process.is_alive():  # pragma: no cover - ignores SIGTERM
        process.kill()
        process.join(1.0)


def _shutdown_workers(workers: list[_Worker], grace: float) -> None:
    """Stop every worker: idle ones are asked to close their envs, busy ones terminated."""
    for w in workers:
        if w.batch is not None:
            batch, w.batch, w.dead = w.batch, None, "closed"
            batch.close()
            continue
        if w.process is None or w.dead is not None:
            continue
        if w.busy:
            w.process.terminate()
        else:
            try:
                w.conn.send_bytes(_CLOSE_MSG)
            except OSError:
                pass
    deadline = time.monotonic() + grace
    for w in workers:
        if w.process is None:
            continue
        try:
            _stop_process(w.process, max(0.0, deadline - time.monotonic()))
        finally:
            if w.conn is not None:
                w.conn.close()
            w.busy = False
            if w.dead is None:
                w.dead = "closed"


def _resolve_timeout(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidArgument(
            f"{name} must be a positive number of seconds (math.inf or None: wait forever), got {value!r}"
        )
    return None if math.isinf(value) else float(value)


def _resolve_busy_poll(value: Any, num_workers: int) -> float:
    if value is None:
        return DEFAULT_BUSY_POLL if 0 < num_workers < _cpus() else 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 0.1:
        raise InvalidArgument(f"busy_poll must be seconds in [0, 0.1] or None (automatic), got {value!r}")
    return float(value)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _default_num_workers(num_envs: int) -> int:
    return max(1, min(num_envs, _cpus()))


# ---------------------------------------------------------------------------- the vector env


class AsyncVectorEnv(VectorEnv):
    """Sub-envs stepped in parallel by worker processes, each holding a contiguous shard.

    Use it when a step costs real CPU (graders, simulators, game engines): each worker
    steps its shard while the others step theirs. Every call sends *one* message per
    worker (all of its sub-envs' commands together) and reads one reply, so the IPC cost
    is per worker, not per sub-env. Semantics (autoreset, partial stepping, seeds,
    failures) are exactly those of `VectorEnv` and `SyncVectorEnv`: both run the same
    per-env code (`gem_core.vector.batch.SubEnvBatch`).

    State machine (`AsyncState`): ``DEFAULT`` → ``reset_async`` → ``WAITING_RESET`` →
    ``reset_wait`` → ``DEFAULT``; the same with ``step_async``/``step_wait``
    (``WAITING_STEP``) and ``call_async``/``call_wait`` (``WAITING_CALL``); ``close`` →
    ``CLOSED`` from any state. Starting a call while one is pending raises
    `AlreadyPendingCallError`; a ``*_wait`` without its ``*_async`` raises
    `NoAsyncCallError`; anything after ``close`` raises `ClosedEnvError`.

    Timeouts: every wait (including the start-up of the workers) gives up after
    ``timeout`` seconds (per call: ``*_wait(timeout=...)``) with `WorkerTimeout`. The call
    stays pending: call the same ``*_wait`` again to keep waiting, or ``close()``, which
    terminates busy workers (a hung sub-env cannot be interrupted otherwise).

    Failures: a sub-env that raises is handled as `VectorEnv` describes (``on_error``); its
    worker goes on. A worker process that dies (killed from outside, a crash in native
    code, a result that cannot be pickled) is detected at once (pipe EOF or the
    process's sentinel): the sub-envs it was running in that call get the failure
    entry (``truncated=True``, ``info["error"]`` a `WorkerError` with
    ``exc_type="WorkerDied"``); its other sub-envs whose episode was live get that entry
    the next time they are stepped. A fresh worker is started for the shard at the start
    of the next call; its sub-envs are new and need a reset, which the autoreset does on
    their next step (under ``DISABLED``: ``reset(options={"reset_mask": ...})``). The
    other workers are untouched. ``restarts`` counts the restarts.

    Cheap envs (a step of microseconds: text games, toy tasks) are bound by the hand-off
    between processes, not by the env. Two things cut it. **Busy-polling**: after each
    reply a worker polls its pipe for ``busy_poll`` seconds before it sleeps, and so does
    this process while it waits; a message then needs no wake-up of a sleeping process,
    which costs tens of microseconds per hand-off on a VM. It is on by default only when a
    CPU is left for this process (``num_workers < CPUs``), since spinning processes that
    outnumber the CPUs slow each other down. **The local shard** (``local_shard=True``):
    this process steps one shard itself, in ``*_wait``, while the workers step theirs; by
    default there is one worker fewer, so with busy-polling on, nobody sleeps. Measured
    on 2 cores (``benchmarks/run.py --only vector``), 8 cheap envs: ~12x the time of a
    plain loop without it, ~2-3x with it, and a CPU-heavy env still uses both cores. What
    the local shard gives up, for its sub-envs only: they are built and stepped in this
    process (as in `SyncVectorEnv`), so a hung one is not interrupted by ``timeout``, a
    crash in native code takes this process down, and an exception that escapes the
    batch (``KeyboardInterrupt``) propagates out of ``*_wait`` — the call stays pending,
    and waiting again reports those sub-envs' episodes as lost. Use it for envs you trust
    to return; keep the default for graders, sandboxes and anything that can hang.

    Start method: ``context=None`` uses multiprocessing's default for the platform (fork
    on Linux before Python 3.14: fastest start, lambdas work as factories, but unsafe once
    the main process runs threads such as CUDA or tokenizer pools — then pass
    ``context="forkserver"`` or ``"spawn"``, which need picklable factories;
    `gem_core.make_vec` builds picklable ones for any env id).

    Args:
        env_fns: one factory per sub-env (a callable with no arguments returning a
            `gem_core.Env`); called inside the worker processes.
        autoreset_mode: see `AutoresetMode` (default ``NEXT_STEP``).
        num_workers: worker processes; default ``min(num_envs, CPUs available to this
            process)`` (one fewer with ``local_shard``). Shard ``k`` of ``S`` (``S =
            num_workers``, plus one with ``local_shard``, whose shard is the first) holds
            the contiguous sub-envs ``[k * num_envs // S, (k + 1) * num_envs // S)``
            (shard sizes differ by at most one).
        context: multiprocessing start method (``"fork"``, ``"forkserver"``, ``"spawn"``)
            or ``None`` for the platform default.
        timeout: default seconds for every wait (``None`` or ``math.inf``: forever).
        on_error: ``"report"`` (default) or ``"raise"``; see `VectorEnv`.
        busy_poll: seconds each side busy-polls before it sleeps (0 to 0.1; ``0``: never);
            ``None`` (default): `DEFAULT_BUSY_POLL` when ``0 < num_workers < CPUs``, else 0.
        local_shard: this process steps the first shard itself (see above); default
            False.

    Attributes:
        num_workers: the number of worker processes.
        local_shard: whether this process steps a shard.
        busy_poll: the busy-poll window in use, in seconds.
        context: the start method in use.
        timeout: the default wait, in seconds (``None``: forever).
        restarts: how many dead workers were replaced.

    Raises:
        InvalidArgument: bad ``env_fns``, ``num_workers``, ``context`` or ``timeout``.
        The exception a factory raised in a worker (re-raised here with the remote
        traceback attached as a note when it can be pickled; else `WorkerError`), or
        `WorkerTimeout` when the workers do not start in time.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        num_workers: int | None = None,
        context: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        on_error: str = "report",
        busy_poll: float | None = None,
        local_shard: bool = False,
    ):
        fns = check_env_fns(env_fns, "AsyncVectorEnv")
        super().__init__(len(fns), autoreset_mode=autoreset_mode, on_error=on_error)
        self.closed = True  # until the workers are up
        n = self.num_envs
        if not isinstance(local_shard, bool):
            raise InvalidArgument(f"local_shard must be True or False, got {local_shard!r}")
        local = int(local_shard)
        if num_workers is None:
            num_workers = _default_num_workers(n) - local
        if (
            isinstance(num_workers, bool)
            or not isinstance(num_workers, int)
            or not 1 - local <= num_workers <= n - local
        ):
            what = "one per CPU" if not local else "one per CPU but one, for the local shard"
            raise InvalidArgument(
                f"num_workers must be an int in [{1 - local}, num_envs={n}{' - 1' if local else ''}] "
                f"or None ({what}), got {num_workers!r}"
            )
        self.timeout = _resolve_timeout(timeout, "timeout")
        try:
            self._ctx = multiprocessing.get_context(context)
        except ValueError:
            raise InvalidArgument(
                f"context must be None or one of {multiprocessing.get_all_start_methods()}, "
                f"got {context!r}"
            ) from None
        self.context: str = self._ctx.get_start_method()
        self.num_workers = num_workers
        self.local_shard = local_shard
        self.busy_poll = _resolve_busy_poll(busy_poll, num_workers)
        self.restarts = 0
        self._label = describe_env_fns(fns)
        self._poller = select.poll()
        self._by_fd: dict[int, _Worker] = {}

        shards = num_workers + local
        bounds = [k * n // shards for k in range(shards + 1)]
        self._workers = [
            _Worker(k, bounds[k], bounds[k + 1], fns[bounds[k] : bounds[k + 1]])
            for k in range(shards)
        ]
        self._worker_of = [w for w in self._workers for _ in range(w.start, w.stop)]
        self._needs_reset = [True] * n
        self._lost: dict[int, WorkerError] = {}
        self._state = AsyncState.DEFAULT
        self._plan: Any = None
        self._awaiting: list[_Worker] = []
        self._replies: dict[int, tuple[Any, ...]] = {}
        # Runs on close(), on garbage collection and at interpreter exit (before
        # multiprocessing joins its children), whichever comes first.
        self._finalizer = mp_util.Finalize(
            self, _shutdown_workers, args=(self._workers, _CLOSE_GRACE_S), exitpriority=10
        )
        try:
            remote = self._workers[local:]
            for w in remote:
                self._start(w)
            self._await_ready(remote)
            if local:  # built after the fork, so that no worker inherits these envs
                w = self._workers[0]
                w.batch = SubEnvBatch(build_envs(w.env_fns, "AsyncVectorEnv"), 0, self.autoreset_mode)
        except BaseException:
            self._finalizer()
            raise
        self.closed = False

    # --- public API ----------------------------------------------------------------------
    @property
    def worker_pids(self) -> list[int | None]:
        """The pid of each worker process (``None`` for a dead one not yet restarted)."""
        return [None if w.dead is not None else w.process.pid for w in self._workers if w.batch is None]

    @property
    def state(self) -> AsyncState:
        """What the vector env is waiting for (`AsyncState`)."""
        return self._state

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> ResetReturn:
        """Reset every sub-env (or those in ``options["reset_mask"]``) and wait.

        See `SyncVectorEnv.reset` for the arguments; waits up to ``timeout`` seconds.
        """
        self._check_open("reset")
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        """Send the reset to the workers and return at once; collect with `reset_wait`."""
        self._check_idle("reset_async")
        indices, seeds, sub_options = self._parse_reset(seed, options)
        self._revive_dead_workers()
        messages: list[tuple[_Worker, Any, Any]] = []  # (worker, local indices, message)
        if indices is None:
            for w in self._workers:
                shard_seeds = None if seeds is None else seeds[w.start : w.stop]
                messages.append((w, None, ("reset", (None, shard_seeds, sub_options))))
        else:
            for w, local, extra in self._group(indices, seeds):
                messages.append((w, local, ("reset", (local, None if seeds is None else extra, sub_options))))
        self._dispatch(messages, AsyncState.WAITING_RESET, (indices, [(w, loc) for w, loc, _ in messages]))

    def reset_wait(self, timeout: float | None = None) -> ResetReturn:
        """Collect the reset started by `reset_async`.

        Args:
            timeout: seconds to wait; ``None``: the constructor's ``timeout``; ``math.inf``:
                forever.

        Raises:
            WorkerTimeout: not every worker answered in time (the reset stays pending).
        """
        self._check_waiting(AsyncState.WAITING_RESET, "reset_wait", "reset_async")
        self._collect(self._awaiting, self._replies, self._wait_s(timeout), "reset")
        indices, plan = self._plan
        replies = self._replies
        self._finish_call()
        needs = self._needs_reset
        positions: list[int] = []
        obs: list[Any] = []
        infos: list[dict[str, Any]] = []
        failed: list[int] = []
        for w, local in plan:
            pos = range(w.start, w.stop) if local is None else [w.start + j for j in local]
            reply = replies[w.wid]
            positions.extend(pos)
            if reply[0] == "ok":
                shard_obs, shard_infos, shard_failed, flags = reply[1]
                obs.extend(shard_obs)
                infos.extend(shard_infos)
                failed.extend(shard_failed)
                for p, flag in zip(pos, flags, strict=True):
                    needs[p] = flag
            else:
                errors = self._worker_died(w, reply[1], pos, "reset")
                for p in pos:
                    obs.append(None)
                    infos.append({"error": errors[p]})
                    failed.append(p)
            for p in pos:
                self._lost.pop(p, None)
        self._has_reset = True
        if indices is None and positions == list(range(self.num_envs)):
            result = (obs, infos)
        else:
            result = scatter_reset(self.num_envs, positions, obs, infos)
        if failed and self.on_error == "raise":
            self._raise_failed(failed, result[1])
        return result

    def step(self, actions: Sequence[Any] | dict[int, Any]) -> StepReturn:
        """Step every sub-env (a list of actions) or some (``{index: action}``) and wait.

        Returns:
            ``(observations, rewards, terminated, truncated, infos)``; see `VectorEnv`.
        """
        self._check_open("step")
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Sequence[Any] | dict[int, Any]) -> None:
        """Check the actions, send them to the workers and return at once.

        Every check (lengths, indices, ``ResetNeeded``, picklability) happens before
        anything is sent: a call that raises here stepped nothing.
        """
        self._check_idle("step_async")
        indices, acts = self._parse_actions(actions)
        lost = self._lost
        self._check_steppable(indices, self._needs_reset, lost)
        self._revive_dead_workers()
        messages: list[tuple[_Worker, Any, Any]] = []
        reported: list[int] = []  # sub-envs whose lost episode this step reports
        if indices is None and not lost:
            for w in self._workers:
                messages.append((w, None, ("step", (None, acts[w.start : w.stop]))))
        else:
            order = range(self.num_envs) if indices is None else indices
            kept: list[int] = []
            kept_actions: list[Any] = []
            for i, action in zip(order, acts, strict=True):
                if i in lost:
                    reported.append(i)
                else:
                    kept.append(i)
                    kept_actions.append(action)
            for w, local, shard_actions in self._group(kept, kept_actions):
                messages.append((w, local, ("step", (local, shard_actions))))
        plan = (indices, [(w, loc) for w, loc, _ in messages], reported)
        self._dispatch(messages, AsyncState.WAITING_STEP, plan)

    def step_wait(self, timeout: float | None = None) -> StepReturn:
        """Collect the step started by `step_async`.

        Args:
            timeout: seconds to wait; ``None``: the constructor's ``timeout``; ``math.inf``:
                forever.

        Raises:
            WorkerTimeout: not every worker answered in time (the step stays pending).
        """
        self._check_waiting(AsyncState.WAITING_STEP, "step_wait", "step_async")
        self._collect(self._awaiting, self._replies, self._wait_s(timeout), "step")
        indices, plan, reported = self._plan
        replies = self._replies
        self._finish_call()
        needs = self._needs_reset
        if indices is None and not reported and all(replies[w.wid][0] == "ok" for w, _ in plan):
            # The common case: every sub-env stepped, shards in index order.
            obs: list[Any] = []
            rewards: list[Any] = []
            terms: list[Any] = []
            truncs: list[Any] = []
            infos: list[dict[str, Any]] = []
            failed: list[int] = []
            for w, _ in plan:
                shard_obs, shard_rewards, shard_terms, shard_truncs, shard_infos, shard_failed, flags = (
                    replies[w.wid][1]
                )
                obs += shard_obs
                rewards += shard_rewards
                terms += shard_terms
                truncs += shard_truncs
                infos += shard_infos
                if shard_failed:
                    failed += shard_failed
                needs[w.start : w.stop] = flags
            result = step_arrays(obs, rewards, terms, truncs, infos)
        else:
            positions: list[int] = []
            obs, rewards, terms, truncs, infos, failed = [], [], [], [], [], []
            for w, local in plan:
                pos = range(w.start, w.stop) if local is None else [w.start + j for j in local]
                reply = replies[w.wid]
                if reply[0] == "ok":
                    shard_obs, shard_rewards, shard_terms, shard_truncs, shard_infos, shard_failed, flags = reply[1]
                    positions.extend(pos)
                    obs += shard_obs
                    rewards += shard_rewards
                    terms += shard_terms
                    truncs += shard_truncs
                    infos += shard_infos
                    failed += shard_failed
                    for p, flag in zip(pos, flags, strict=True):
                        needs[p] = flag
                else:
                    errors = self._worker_died(w, reply[1], pos, "step")
                    reported_errors = [(p, errors[p]) for p in pos]
                    self._append_failures(reported_errors, positions, obs, rewards, terms, truncs, infos, failed)
            lost_errors = [(p, self._lost.pop(p)) for p in reported if p in self._lost]
            self._append_failures(lost_errors, positions, obs, rewards, terms, truncs, infos, failed)
            result = scatter_step(self.num_envs, positions, obs, rewards, terms, truncs, infos)
        if failed and self.on_error == "raise":
            self._raise_failed(failed, result[4])
        return result

    def call(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """``env.get_wrapper_attr(name)`` on each sub-env, called with the arguments when
        callable; returns the results in index order (they must pickle).

        Raises:
            WorkerError: a sub-env raised (the lowest index), or a worker died.
        """
        self._check_open("call")
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def get_attr(self, name: str) -> list[Any]:
        """``env.get_wrapper_attr(name)`` on each sub-env, in index order."""
        self._call_async(name, args=(), kwargs={}, get_only=True)
        return self.call_wait()

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Start `call` on every worker; collect with `call_wait`."""
        self._call_async(name, args=args, kwargs=kwargs, get_only=False)

    def call_wait(self, timeout: float | None = None) -> list[Any]:
        """Collect the results of `call_async` (see `step_wait` for ``timeout``)."""
        self._check_waiting(AsyncState.WAITING_CALL, "call_wait", "call_async")
        self._collect(self._awaiting, self._replies, self._wait_s(timeout), "call")
        name, plan = self._plan
        replies = self._replies
        self._finish_call()
        results: list[Any] = []
        first_error: WorkerError | None = None
        for w, _ in plan:
            reply = replies[w.wid]
            if reply[0] == "ok":
                results.extend(reply[1])
                continue
            if reply[0] == "error":
                error = reply[1]
            else:
                self._worker_died(w, reply[1], (), "call")
                error = WorkerError(
                    f"{w.label} {reply[1]} during call({name!r}); a fresh worker is started on the "
                    "next call (its sub-envs need a reset)",
                    exc_type="WorkerDied",
                    remote_message=reply[1],
                )
            if first_error is None:
                first_error = error
        if first_error is not None:
            raise first_error
        return results

    def close(self) -> None:
        """Stop the workers: idle ones close their sub-envs and exit, busy ones (a pending
        call, e.g. after a `WorkerTimeout`) are terminated. Waits at most a few seconds;
        safe to call twice, and run automatically on garbage collection and at exit."""
        if self.closed:
            return
        self.closed = True
        self._state = AsyncState.CLOSED
        self._finalizer()

    def __repr__(self) -> str:
        state = ", closed" if self.closed else ""
        return (
            f"AsyncVectorEnv({self._label}, num_envs={self.num_envs}, "
            f"num_workers={getattr(self, 'num_workers', '?')}, "
            f"{'local_shard=True, ' if getattr(self, 'local_shard', False) else ''}"
            f"autoreset_mode={self.autoreset_mode.name}{state})"
        )

    __str__ = __repr__

    # --- internals -----------------------------------------------------------------------
    def _check_idle(self, method: str) -> None:
        self._check_open(method)
        if self._state is not AsyncState.DEFAULT:
            pending = self._state.value
            raise AlreadyPendingCallError(
                f"{method}() called while a {pending} is pending on {self!r}; call "
                f"{pending}_wait() first to collect it (after a WorkerTimeout: wait again or close())"
            )

    def _check_waiting(self, state: AsyncState, method: str, starter: str) -> None:
        self._check_open(method)
        if self._state is not state:
            now = "nothing" if self._state is AsyncState.DEFAULT else f"a {self._state.value}"
            raise NoAsyncCallError(
                f"{method}() called without a pending {starter}() ({now} is pending); "
                f"call {starter}(...) first"
            )

    def _wait_s(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else _resolve_timeout(timeout, "timeout")

    def _group(self, indices: Sequence[int], values: Sequence[Any] | None):
        """Yield ``(worker, local indices, aligned values)`` for sorted global ``indices``."""
        groups: dict[int, tuple[_Worker, list[int], list[Any]]] = {}
        worker_of = self._worker_of
        for k, i in enumerate(indices):
            w = worker_of[i]
            group = groups.get(w.wid)
            if group is None:
                group = groups[w.wid] = (w, [], [])
            group[1].append(i - w.start)
            group[2].append(None if values is None else values[k])
        return [groups[wid] for wid in sorted(groups)]

    def _dispatch(self, messages: list[tuple[_Worker, Any, Any]], state: AsyncState, plan: Any) -> None:
        """Pickle every message first (nothing is sent if one fails), then send them all.

        The local shard's message is kept, not sent: `_collect` answers it."""
        try:
            payloads = [
                None if w.batch is not None else pickle.dumps(message, _PROTOCOL) for w, _, message in messages
            ]
        except Exception as e:
            raise InvalidArgument(
                f"{state.value}: the arguments could not be pickled to send to the worker "
                f"processes ({type(e).__name__}: {e}); actions, seeds and options must be picklable. "
                "Nothing was sent."
            ) from e
        for (w, _, message), payload in zip(messages, payloads, strict=True):
            if payload is None:
                w.message = message
                w.busy = True
                continue
            try:
                w.conn.send_bytes(payload)
            except OSError:  # the worker is gone; the wait reports it
                self._bury(w, None)
            else:
                w.busy = True
        self._plan = plan
        self._awaiting = [w for w, _, _ in messages]
        self._replies = {}
        self._state = state

    def _finish_call(self) -> None:
        self._state = AsyncState.DEFAULT
        self._awaiting = []
        self._replies = {}
        self._plan = None

    def _collect(
        self, awaiting: list[_Worker], replies: dict[int, tuple[Any, ...]], timeout: float | None, what: str
    ) -> None:
        """Read one reply per worker in ``awaiting`` (removing it); a death is a reply too.

        Raises `WorkerTimeout` after ``timeout`` seconds; ``awaiting``/``replies`` keep the
        progress so that a later call can resume.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        local = self._workers[0] if self.local_shard else None
        if local is not None and local in awaiting:
            # While the workers step their shards, this process steps its own.
            awaiting.remove(local)
            message, local.message, local.busy = local.message, None, False
            try:
                replies[local.wid] = _answer(local.batch, *message)
            except BaseException as e:  # KeyboardInterrupt: its episodes are lost, as a dead worker's
                local.batch.needs_reset = [True] * len(local.batch.envs)
                replies[local.wid] = ("dead", f"raised {type(e).__name__}: {e}")
                raise
        if self.busy_poll and awaiting:
            self._spin(awaiting, replies)
        while awaiting:
            # Replies (or EOFs) already there are read without a wait.
            for w in list(awaiting):
                if w.dead is not None:
                    replies[w.wid] = ("dead", w.dead)
                    awaiting.remove(w)
                elif w.conn.poll(0):
                    replies[w.wid] = self._read(w)
                    awaiting.remove(w)
            if not awaiting:
                break
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            waitables: list[Any] = [w.conn for w in awaiting]
            waitables += [w.process.sentinel for w in awaiting]
            ready = mp_connection.wait(waitables, remaining)
            if not ready:
                self._raise_timeout(awaiting, timeout, what)
            # A process that exited without closing its pipe (a child of the worker may
            # hold it open) is seen through its sentinel.
            ready_sentinels = {obj for obj in ready if isinstance(obj, int)}
            for w in list(awaiting):
                if w.process.sentinel in ready_sentinels and not w.conn.poll(0):
                    replies[w.wid] = self._read(w)
                    awaiting.remove(w)

    def _spin(self, awaiting: list[_Worker], replies: dict[int, tuple[Any, ...]]) -> None:
        """Busy-poll for the replies for up to ``busy_poll`` seconds (see the class doc)."""
        clock = time.perf_counter
        end = clock() + self.busy_poll
        poll = self._poller.poll
        by_fd = self._by_fd
        left = len(awaiting)
        while True:
            for fd, _ in poll(0):
                w = by_fd.get(fd)
                if w is not None and w.wid not in replies and w in awaiting:
                    replies[w.wid] = self._read(w, readable=True)
                    awaiting.remove(w)
                    left -= 1
            if not left or clock() >= end:
                return

    def _read(self, w: _Worker, readable: bool = False) -> tuple[Any, ...]:
        """The reply of a worker known to be ready: a message, or ``("dead", reason)``.

        ``readable``: its pipe polled readable (a message or EOF) just now."""
        try:
            if readable or w.conn.poll():
                message = w.conn.recv()
                if message[0] == "fatal":
                    _, _, exc_type, text, _ = message
                    self._bury(w, f"failed with {exc_type}: {text}")
                    return ("dead", w.dead, message)
                w.busy = False
                return message
        except (EOFError, OSError):
            pass
        self._bury(w, None)
        return ("dead", w.dead)

    def _bury(self, w: _Worker, reason: str | None, grace: float = 1.0) -> None:
        """Reap a dead (or failed) worker's process and record why it is gone."""
        _stop_process(w.process, grace)
        if not w.conn.closed:
            fd = w.conn.fileno()
            if self._by_fd.pop(fd, None) is not None:
                self._poller.unregister(fd)
        w.conn.close()
        w.busy = False
        w.dead = reason or _exit_text(w.process.exitcode)

    def _raise_timeout(self, awaiting: list[_Worker], timeout: float | None, what: str) -> None:
        late = "; ".join(w.label for w in awaiting)
        if what == "start":
            fix = "raise AsyncVectorEnv(timeout=...) if the envs are slow to build"
        else:
            fix = (
                f"call {what}_wait() again to keep waiting, or close() the vector env "
                "(it terminates busy workers)"
            )
        raise WorkerTimeout(
            f"{self!r}: {what} timed out after {timeout:g} s waiting for {late}; {fix}"
        )

    def _start(self, w: _Worker) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=_worker_main,
            args=(child_conn, parent_conn, w.env_fns, w.start, self.autoreset_mode, self.busy_poll),
            name=f"gem-vector-worker-{w.wid}",
            daemon=False,  # envs may start processes of their own (sandboxes, servers)
        )
        try:
            process.start()
        except Exception as e:
            child_conn.close()
            parent_conn.close()
            if isinstance(e, (pickle.PicklingError, AttributeError, TypeError)):
                raise InvalidArgument(
                    f"the env factories of sub-envs {w.start}-{w.stop - 1} could not be sent to a "
                    f"worker started with context={self.context!r} ({type(e).__name__}: {e}); under "
                    "'spawn' and 'forkserver' factories must be picklable: use functools.partial of "
                    "a module-level function or class (gem_core.make_vec does), or context='fork'"
                ) from e
            raise
        child_conn.close()
        w.process, w.conn, w.busy, w.dead = process, parent_conn, True, None
        fd = parent_conn.fileno()
        self._poller.register(fd, select.POLLIN)
        self._by_fd[fd] = w

    def _await_ready(self, workers: list[_Worker]) -> None:
        """Wait for the start-up handshake of ``workers``; raise the first failure."""
        awaiting = list(workers)
        replies: dict[int, tuple[Any, ...]] = {}
        try:
            self._collect(awaiting, replies, self.timeout, "start")
        except WorkerTimeout:
            for w in awaiting:
                self._bury(w, "did not start in time", grace=0.0)
            raise
        failures = [(w, replies[w.wid]) for w in workers if replies[w.wid][0] != "ready"]
        if not failures:
            return
        w, reply = failures[0]
        fatal = reply[2] if len(reply) > 2 else None
        if fatal is not None:
            _, exc, exc_type, text, remote_tb = fatal
            if isinstance(exc, BaseException):
                if hasattr(exc, "add_note"):
                    exc.add_note(
                        f"(raised while {w.label} built its sub-envs; remote traceback:\n"
                        f"{remote_tb.rstrip()})"
                    )
                raise exc
            raise WorkerError(
                f"{w.label} could not build its sub-envs: {exc_type}: {text}",
                exc_type=exc_type,
                remote_message=text,
                remote_traceback=remote_tb,
            )
        raise WorkerError(
            f"{w.label} {reply[1]} while building its sub-envs",
            exc_type="WorkerDied",
            remote_message=str(reply[1]),
        )

    def _revive_dead_workers(self) -> None:
        """Start a fresh worker for every shard whose worker died (its sub-envs need a reset)."""
        dead = [w for w in self._workers if w.dead is not None]
        if not dead:
            return
        for w in dead:
            self._start(w)
        self._await_ready(dead)
        self.restarts += len(dead)

    def _worker_died(
        self, w: _Worker, reason: str, in_flight: Sequence[int], during: str
    ) -> dict[int, WorkerError]:
        """Mark the shard of a dead worker as needing a reset; return the errors of the
        sub-envs in flight, and keep one for each other live sub-env (`_lost`)."""
        if self.autoreset_mode is AutoresetMode.DISABLED:
            fix = "reset it with reset(options={'reset_mask': mask})"
        else:
            fix = "it is reset automatically on its next step"
        flying = set(in_flight)
        errors: dict[int, WorkerError] = {}
        for i in range(w.start, w.stop):
            if i in flying:
                when = f"during {during}()"
            elif not self._needs_reset[i]:
                when = f"while sub-env {i} was idle (reported at its next step)"
            else:
                continue
            error = WorkerError(
                f"{w.label} {reason} {when}; sub-env {i}'s episode was lost. A fresh worker is "
                f"started for this shard on the next call; {fix}.",
                index=i,
                exc_type="WorkerDied",
                remote_message=reason,
            )
            if i in flying:
                errors[i] = error
            else:
                self._lost[i] = error
            self._needs_reset[i] = True
        for i in range(w.start, w.stop):
            self._needs_reset[i] = True
        return errors

    @staticmethod
    def _append_failures(
        failures: list[tuple[int, WorkerError]], positions: list[int], obs: list[Any],
        rewards: list[Any], terms: list[Any], truncs: list[Any], infos: list[dict[str, Any]],
        failed: list[int],
    ) -> None:
        for p, error in failures:
            positions.append(p)
            obs.append(None)
            rewards.append(0.0)
            terms.append(False)
            truncs.append(True)
            infos.append({"error": error})
            failed.append(p)

    def _call_async(self, name: str, *, args: tuple, kwargs: dict[str, Any], get_only: bool) -> None:
        method = "get_attr" if get_only else "call_async"
        self._check_idle(method)
        if not isinstance(name, str):
            raise InvalidArgument(f"{method}() expects an attribute name (str), got {type(name).__name__}")
        self._revive_dead_workers()
        message = ("call", (name, args, kwargs, get_only))
        messages = [(w, None, message) for w in self._workers]
        self._dispatch(messages, AsyncState.WAITING_CALL, (name, [(w, None) for w in self._workers]))
