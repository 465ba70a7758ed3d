r"""Math answer grading: `MathGrader` (math-verify in a small, shared, killable pool) and its fast path.

The math envs grade an answer in three steps:

1. `extract_boxed` (from `gem_core.grading.extract`, re-exported here) takes the content
   of the last ``\boxed{...}`` (or ``\fbox{...}``) of the agent's response.
2. A cheap fast path in the calling thread: the same string after light normalisation
   (whitespace, ``$`` delimiters, ``\left``/``\right``, ``\dfrac``; also after dropping a
   leading ``x=``) is correct; two plain integers (thousands commas allowed) compare by
   value. A comma next to a space is a list separator: ``10, 100`` never matches ``10100``
   or ``10,100`` here (math-verify decides). Linear time, no process involved.
3. Otherwise `math-verify <https://github.com/huggingface/Math-Verify>`_ parses both strings
   (each wrapped in ``$...$`` unless it already has math delimiters, so reference answers
   without ``$`` work) and compares them (``verify(reference, answer)``), in a worker of a
   small process pool with a hard per-call timeout.

The pool (`MathGrader`, default 2 workers) is shared by every env of the process through
`get_grader`. Each worker is a fresh interpreter (``subprocess``, not ``fork``: safe in a
process that runs threads or holds a GPU) that imports math-verify once and warms it up.
A call that exceeds its timeout kills its worker; the answer is graded wrong and flagged
(`GradeResult.timed_out`), a replacement starts in the background, and the killed worker's
pipes are dropped, so a slow answer can never leak its result into a later grade (the
reference GEM's per-env ``multiprocessing.Pool(1)`` does: after one slow grade its next
answers read stale results). A worker that dies mid-call is handled the same way
(`GradeResult.crashed`). Each worker's address space is capped (``memory_mb``, default
1 GiB): an answer like ``2^{2^{40}}`` (a 128 GiB integer) raises MemoryError in the worker
and is graded wrong (math-verify reports it as no parse) instead of growing until the
timeout, or, in a worker orphaned mid-computation, without end.

Isolation (what the grader does and does not give): the workers are plain subprocesses of
the host, with the host's user, file system and network, bounded by the per-call timeout
(kill) and the address-space cap; they are *not* in `gem_core.sandbox`. That is enough
because no answer text is ever executed: math-verify turns LaTeX into sympy objects with
its own grammar (latex2sympy2), and the only ``sympy.parse_expr`` it calls (plain
expressions) receives text its extraction pattern limited to digits, ``.``, whitespace and
``+-*/^()×÷``, so no name, attribute or call can reach Python's ``eval``
(``tests/grading/test_math.py`` feeds it code-shaped answers that would leave a file if
run). A math-verify upgrade that widens that pattern must be re-checked. The fast path
(step 2) is plain string work, linear in the answer's length. Nothing is required from the
user beyond ``pip install "gem-core[math]"``. (ReasoningGym scorers do run answers as
code; they are scored in the sandbox instead: `gem_core.grading.rg`.)

Workers exit when their parent exits (pipe closed, or a parent-pid watchdog if they are
busy), and the shared grader is closed ``atexit``. After ``os.fork`` the child drops the
parent's grader without touching its workers; its next `get_grader` starts its own pool.

Settings of the shared grader come from the environment: ``GEM_MATH_GRADER_WORKERS``
(default 2), ``GEM_MATH_GRADER_TIMEOUT`` (seconds, default 5) and
``GEM_MATH_GRADER_MEMORY_MB`` (default 1024).
"""

from __future__ import annotations

import collections
import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core._closing import Closing
from gem_core.errors import DependencyNotInstalled, GraderUnavailable, InvalidArgument
from gem_core.grading._shared import ProcessShared, sized_by_environment
from gem_core.grading.extract import extract_boxed

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_WORKERS",
    "MAX_ANSWER_CHARS",
    "GradeResult",
    "GraderUnavailable",
    "MathGrader",
    "extract_boxed",
    "get_grader",
    "normalize_answer",
]

DEFAULT_WORKERS = 2
"""Worker processes of the shared grader (override: ``GEM_MATH_GRADER_WORKERS``)."""
DEFAULT_TIMEOUT_S = 5.0
"""Per-call timeout of the shared grader, seconds (override: ``GEM_MATH_GRADER_TIMEOUT``)."""
DEFAULT_MEMORY_MB = 1024
"""Address-space cap of each worker, MiB (override: ``GEM_MATH_GRADER_MEMORY_MB``)."""
MAX_ANSWER_CHARS = 5_000
"""Answers (and box contents) longer than this are graded wrong without parsing."""
_START_TIMEOUT_S = 120.0  # a worker must import math-verify and warm up within this
_SPAWN_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class GradeResult:
    """The outcome of one grade.

    Attributes:
        correct: the answer is equivalent to the reference.
        timed_out: grading exceeded its timeout; the worker was killed (``correct`` is False).
        crashed: the worker died while grading (``correct`` is False).
        error: why the answer could not be graded normally (timeout, crash, a math-verify
            exception, an over-long answer), else ``None``.
        fast_path: decided in the calling thread without math-verify.
        seconds: wall time of the call, queueing for a free worker included.
    """

    correct: bool
    timed_out: bool = False
    crashed: bool = False
    error: str | None = None
    fast_path: bool = False
    seconds: float = 0.0

    def __bool__(self) -> bool:
        return self.correct


# --- normalisation and the fast path ---------------------------------------------------------
# Every pattern here runs on model text in the caller's thread, outside the grader's
# timeout: each is a single pass (no nested or adjacent ambiguous quantifiers), and the
# wrappers are stripped by two anchored matches, not a loop of substitutions (a 4.9 KB
# answer of delimiters once took 34 s).
_LEADING_WRAPPERS = re.compile(r"(?:[\s$]|\\\(|\\\[)*")  # whitespace, $, \(, \[
_TRAILING_WRAPPERS = re.compile(r"(?:[\s$.]|\)\\|\]\\)*")  # reversed: whitespace, $, ., \), \]
_LATEX_SPACES = re.compile(r"\\[,;:! ]|~")
_INT_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)")
_VAR_EQ_RE = re.compile(r"[A-Za-z]=")
_MATH_DELIM_RE = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")
# A comma next to a space separates list items ("10, 100"); only a bare comma between
# digit groups can be a thousands separator ("10,100"). A LaTeX ``\,`` is a thin space.
_LIST_COMMA_RE = re.compile(r"(?<!\\),(?:\s|\\[,;:! ]|~)|\s,")


def _strip_wrappers(s: str) -> str:
    r"""``s`` without leading/trailing whitespace, ``$``, ``\(``/``\[`` (front),
    ``\)``/``\]`` and ``.`` (back), in any order and number; linear time."""
    start = _LEADING_WRAPPERS.match(s).end()
    rest = s[start:]
    cut = _TRAILING_WRAPPERS.match(rest[::-1]).end()
    return rest[: len(rest) - cut]


def normalize_answer(s: str) -> str:
    r"""A light canonical form for exact matching: no whitespace, math delimiters,
    ``\left``/``\right``, ``\dfrac``/``\tfrac`` (as ``\frac``), or trailing period.

    Linear in ``len(s)``.

    >>> normalize_answer(r" $\left( \dfrac{1}{2}, 3 \right)$. ")
    '(\\frac{1}{2},3)'
    """
    s = _strip_wrappers(s)
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    if "\\" in s or "~" in s:
        s = _LATEX_SPACES.sub("", s)  # before whitespace: "\\ x" must not become "\\x"
    return "".join(s.split())


def _fast_grade(answer: str, reference: str) -> bool | None:
    """True/False when decidable without math-verify, else ``None``."""
    a, r = normalize_answer(answer), normalize_answer(reference)
    if not a:
        return False
    same = a == r
    var_eq = not same and _VAR_EQ_RE.match(a) is not None and "=" not in r and a[2:] == r
    ints = not same and not var_eq and _INT_RE.fullmatch(a) and _INT_RE.fullmatch(r)
    if (same or var_eq or ints) and _has_list_comma(answer) != _has_list_comma(reference):
        return None  # "10, 100" (a list) vs "10,100" or "10100": normalised alike; ask math-verify
    if same:
        return True
    if var_eq:
        return True  # "x=3" vs "3": math-verify agrees, but its equation handling is slow
    if ints:
        return _int_key(a) == _int_key(r)
    return None


def _has_list_comma(s: str) -> bool:
    return "," in s and _LIST_COMMA_RE.search(s) is not None


def _int_key(s: str) -> tuple[bool, str]:
    """An integer literal as (negative, digits): compares by value at any length."""
    digits = s.replace(",", "").lstrip("-").lstrip("0") or "0"
    return s.startswith("-") and digits != "0", digits


def _as_latex(s: str) -> str:
    """Wrap ``s`` in ``$...$`` unless it already carries math delimiters or a box."""
    return s if _MATH_DELIM_RE.search(s) else f"${s}$"


def _verify(answer: str, reference: str) -> bool:
    """math-verify's verdict (runs in a worker; no timeouts of its own)."""
    from math_verify import parse, verify

    def _parse(s: str) -> list[Any]:
        parsed = parse(_as_latex(s), parsing_timeout=None)
        if not parsed and _as_latex(s) != s:
            parsed = parse(s, parsing_timeout=None)
        return parsed

    gold = _parse(reference)
    if not gold:
        return False
    pred = _parse(answer)
    if not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=None))


# --- the worker process ----------------------------------------------------------------------
def _worker_main(read_fd: int, write_fd: int, parent_pid: int, memory_mb: int = 0) -> None:  # pragma: no cover - in a subprocess
    """Serve grade requests on a pipe pair until the parent closes it or exits."""
    import logging
    from multiprocessing.connection import Connection

    if memory_mb > 0:
        import resource

        cap = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    rx = Connection(read_fd, writable=False)
    tx = Connection(write_fd, readable=False)

    def watchdog() -> None:  # a busy worker notices its parent's death too
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    _verify("\\frac{1}{2}", "0.5")  # import and warm up sympy / the LaTeX parser
    tx.send(("ready", os.getpid()))
    while True:
        try:
            msg = rx.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        answer, reference, debug = msg
        if debug:
            if debug.get("crash"):
                os._exit(3)
            if debug.get("sleep"):
                time.sleep(float(debug["sleep"]))
        try:
            tx.send(("ok", _verify(answer, reference), None))
        except Exception as e:  # noqa: BLE001 - math-verify raising is a graded 0, flagged
            tx.send(("ok", False, f"{type(e).__name__}: {str(e)[:200]}"))


_WORKER_CODE = (
    "import sys; from gem_core.grading.math import _worker_main; "
    "_worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))"
)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class _Worker:
    __slots__ = ("proc", "tx", "rx")

    def __init__(self, proc: subprocess.Popen, tx: Any, rx: Any):
        self.proc = proc
        self.tx = tx
        self.rx = rx

    def close_pipes(self) -> None:
        for conn in (self.tx, self.rx):
            try:
                conn.close()
            except OSError:
                pass

    def kill(self) -> None:
        """Kill the process and reap it in the background; drop its pipes."""
        self.close_pipes()
        try:
            self.proc.kill()
        except OSError:
            pass
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - best effort
            pass


class _Waiter:
    __slots__ = ("event", "worker")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.worker: _Worker | None = None


_ALL_GRADERS: weakref.WeakSet[MathGrader] = weakref.WeakSet()


class MathGrader(Closing):
    """A small process pool that grades math answers with math-verify, with hard timeouts.

    Thread-safe: any number of threads may call `grade` at once; each call takes one idle
    worker (waiting for one when all are busy). Normally one instance serves the whole
    process: use `get_grader`. Workers start in the background at construction.

    Args:
        num_workers: worker processes (>= 1).
        timeout: default per-call timeout in seconds (the time a worker may spend on one
            answer; waiting for a free worker does not count).
        max_answer_chars: longer answers are graded wrong (flagged) without parsing.
        memory_mb: address-space cap of each worker in MiB (``RLIMIT_AS``); an answer
            that needs more is graded wrong (the MemoryError is raised in the worker).
            ``None``: no cap.

    Raises:
        DependencyNotInstalled: math-verify is missing (``pip install "gem-core[math]"``).
        InvalidArgument: a non-positive ``num_workers`` or ``timeout``, or a
            ``memory_mb`` under 64.
    """

    def __init__(
        self,
        num_workers: int = DEFAULT_WORKERS,
        timeout: float = DEFAULT_TIMEOUT_S,
        *,
        max_answer_chars: int = MAX_ANSWER_CHARS,
        memory_mb: int | None = DEFAULT_MEMORY_MB,
    ):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise InvalidArgument(
                f"MathGrader(num_workers=...) must be an int >= 1, got {num_workers!r}"
            )
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise InvalidArgument(
                f"MathGrader(timeout=...) must be a positive number of seconds, got {timeout!r}"
            )
        if memory_mb is not None and (
            isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb < 64
        ):
            raise InvalidArgument(
                f"MathGrader(memory_mb=...) must be an int >= 64 (MiB) or None, got {memory_mb!r}; "
                f"the default is {DEFAULT_MEMORY_MB}"
            )
        if importlib.util.find_spec("math_verify") is None:
            raise DependencyNotInstalled("math_verify", "math", "math answer grading")
        self.num_workers = num_workers
        self.timeout = float(timeout)
        self.max_answer_chars = int(max_answer_chars)
        self.memory_mb = memory_mb
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._free: list[_Worker] = []
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._workers: set[_Worker] = set()
        self._spawning = 0
        self._spawn_error: str | None = None
        self._closed = False
        self.restarts = 0
        """Workers replaced after a timeout or a crash (for monitoring)."""
        _ALL_GRADERS.add(self)
        for _ in range(num_workers):
            self._spawn_async()

    # --- pool management -----------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether `close` was called (or the grader was inherited across a fork)."""
        return self._closed

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for tests and memory accounting)."""
        with self._lock:
            return sorted(w.proc.pid for w in self._workers)

    def _spawn_async(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._spawning += 1
        threading.Thread(target=self._spawn, name="gem-math-grader-spawn", daemon=True).start()

    def _spawn(self) -> None:
        last_error = ""
        try:
            for attempt in range(_SPAWN_ATTEMPTS):
                if self._closed:
                    return
                worker, last_error = self._start_worker()
                if worker is not None:
                    with self._lock:
                        if self._closed:
                            worker.kill()
                            return
                        self._workers.add(worker)
                        self._spawn_error = None
                    self._release(worker)
                    return
                time.sleep(0.5 * (attempt + 1))
            with self._lock:
                self._spawn_error = last_error
        finally:
            with self._lock:
                self._spawning -= 1

    def _start_worker(self) -> tuple[_Worker | None, str]:
        from multiprocessing.connection import Connection

        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        env.setdefault("OMP_NUM_THREADS", "1")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE, str(req_r), str(res_w), str(os.getpid()),
                 str(self.memory_mb or 0)],
                pass_fds=(req_r, res_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
            )
        except OSError as e:
            for fd in (req_r, req_w, res_r, res_w):
                os.close(fd)
            return None, f"could not start {sys.executable}: {e}"
        os.close(req_r)
        os.close(res_w)
        worker = _Worker(proc, Connection(req_w, readable=False), Connection(res_r, writable=False))
        try:
            ready = worker.rx.poll(_START_TIMEOUT_S)
            msg = worker.rx.recv() if ready else None
        except (EOFError, OSError):
            msg = None
        if msg is not None and msg[0] == "ready":
            # The worker's stderr is drained in the background so it can never block.
            threading.Thread(target=_drain, args=(proc.stderr,), daemon=True).start()
            return worker, ""
        worker.kill()
        try:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        except Exception:  # noqa: BLE001
            err = ""
        tail = " | ".join(err.strip().splitlines()[-3:]) or "no output"
        why = "did not start in time" if msg is None and proc.poll() is None else "exited"
        return None, f"math grader worker {why} (stderr: {tail})"

    def _unusable(self) -> str | None:
        """Why no worker can be handed out (closed, or none could start); call under the lock."""
        if self._closed:
            return "the math grader is closed; use gem_core.grading.math.get_grader() for a live one"
        if not self._workers and self._spawning == 0:
            return (
                f"no math grader worker could be started: {self._spawn_error or 'unknown reason'}. "
                f"Check that `{sys.executable} -c 'import math_verify'` works."
            )
        return None

    def _acquire(self) -> _Worker:
        """An idle worker; callers are served first come, first served."""
        with self._lock:
            problem = self._unusable()
            if problem:
                raise GraderUnavailable(problem)
            if self._free and not self._waiters:
                return self._free.pop()
            waiter = _Waiter()
            self._waiters.append(waiter)
        while True:
            if waiter.event.wait(0.25):
                return waiter.worker  # type: ignore[return-value]
            with self._lock:
                if waiter.worker is not None:
                    return waiter.worker
                problem = self._unusable()
                if problem:
                    self._waiters.remove(waiter)
                    raise GraderUnavailable(problem)

    def _release(self, worker: _Worker) -> None:
        """Hand a ready worker to the longest-waiting caller, or park it."""
        with self._lock:
            if self._closed or worker not in self._workers:
                return
            if self._waiters:
                waiter = self._waiters.popleft()
                waiter.worker = worker
                waiter.event.set()
            else:
                self._free.append(worker)

    def _discard(self, worker: _Worker) -> None:
        """Kill a worker (timeout, crash) and start its replacement."""
        with self._lock:
            self._workers.discard(worker)
            self.restarts += 1
        worker.kill()
        self._spawn_async()

    # --- grading -------------------------------------------------------------------------
    def grade(self, answer: Any, reference: Any, timeout: float | None = None) -> bool:
        """Whether ``answer`` is equivalent to ``reference`` (see `grade_result`)."""
        return self.grade_result(answer, reference, timeout).correct

    def grade_result(
        self,
        answer: Any,
        reference: Any,
        timeout: float | None = None,
        *,
        _debug: dict[str, Any] | None = None,
    ) -> GradeResult:
        r"""Grade ``answer`` against ``reference`` and say how it went.

        Args:
            answer: the final answer (e.g. a box's content); if it still holds a
                ``\boxed{}``, the last box is graded. Numbers are converted with ``str``.
            reference: the reference answer, with or without ``$`` delimiters.
            timeout: seconds a worker may spend on it (default: the grader's ``timeout``).
            _debug: testing only: ``{"sleep": s}`` makes the worker sleep ``s`` seconds
                first, ``{"crash": True}`` makes it exit; both skip the fast path.

        Returns:
            A `GradeResult`; ``correct`` is False for a timeout, a crash, a math-verify
            error or an answer over ``max_answer_chars`` (each flagged).

        Raises:
            GraderUnavailable: the grader is closed, or no worker could be started.
        """
        start = time.perf_counter()
        answer = answer if isinstance(answer, str) else "" if answer is None else str(answer)
        reference = reference if isinstance(reference, str) else str(reference)
        if "\\boxed" in answer or "\\fbox" in answer:
            answer = extract_boxed(answer) or ""
        if len(answer) > self.max_answer_chars:
            return GradeResult(
                False,
                error=f"answer of {len(answer)} characters is over the {self.max_answer_chars} limit",
                fast_path=True,
                seconds=time.perf_counter() - start,
            )
        if not _debug:
            fast = _fast_grade(answer, reference)
            if fast is not None:
                return GradeResult(fast, fast_path=True, seconds=time.perf_counter() - start)
        if os.getpid() != self._pid:
            raise GraderUnavailable(
                "this MathGrader belongs to the parent process (it was inherited across a fork); "
                "call gem_core.grading.math.get_grader() in the child"
            )
        limit = self.timeout if timeout is None else float(timeout)
        worker = self._acquire()
        try:
            worker.tx.send((answer, reference, _debug))
            if worker.rx.poll(limit):
                _, correct, error = worker.rx.recv()
            else:
                self._discard(worker)
                return GradeResult(
                    False,
                    timed_out=True,
                    error=f"grading took longer than {limit:g} s; the worker was restarted",
                    seconds=time.perf_counter() - start,
                )
        except (EOFError, OSError) as e:
            closed = self._closed
            self._discard(worker)
            if closed:
                raise GraderUnavailable("the math grader was closed during a grade") from e
            return GradeResult(
                False,
                crashed=True,
                error=f"the grader worker died ({type(e).__name__}); it was restarted",
                seconds=time.perf_counter() - start,
            )
        except BaseException:  # e.g. KeyboardInterrupt mid-exchange: the worker's state is unknown
            self._discard(worker)
            raise
        self._release(worker)
        return GradeResult(bool(correct), error=error, seconds=time.perf_counter() - start)

    # --- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every worker. Safe to call twice; later grades raise `GraderUnavailable`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            self._workers.clear()
        if os.getpid() != self._pid:
            return
        for w in workers:
            try:
                w.tx.send(None)
            except OSError:
                pass
            w.kill()

    def _abandon(self) -> None:
        """In a forked child: forget the parent's workers without signalling them."""
        self._closed = True
        self._lock = threading.Lock()
        for w in list(self._workers):
            w.close_pipes()
        self._workers = set()
        self._free = []
        self._waiters = collections.deque()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._workers)} workers"
        return f"<MathGrader {state}, timeout {self.timeout:g} s>"


def _drain(stream: Any) -> None:
    try:
        while stream.read(65536):
            pass
    except Exception:  # noqa: BLE001
        pass


# --- the process-wide instance ---------------------------------------------------------------
_SHARED: ProcessShared[MathGrader] = ProcessShared(
    sized_by_environment(
        MathGrader, "GEM_MATH_GRADER", workers=DEFAULT_WORKERS, timeout=DEFAULT_TIMEOUT_S, memory_mb=DEFAULT_MEMORY_MB
    )
)


def get_grader() -> MathGrader:
    """The process-wide `MathGrader` every math env uses (created on first call).

    A closed shared grader, or one inherited across a fork, is replaced by a new one.
    """
    return _SHARED.get()


def _abandon_graders_in_child() -> None:
    for g in list(_ALL_GRADERS):
        g._abandon()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_abandon_graders_in_child)
