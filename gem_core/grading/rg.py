r"""ReasoningGym answer scoring in `gem_core.sandbox` isolation: `RGScorer` and `get_scorer`.

A ``reasoning_gym`` dataset scores an answer with its own ``score_answer``, and several of
them run the answer as code: ``eval(answer)`` (spiral_matrix, string_insertion,
binary_matrix, n_queens) or sympy's ``parse_expr`` (countdown, puzzle24,
polynomial_multiplication, simple_integration, intermediate_integration), which evaluates
Python too. So no answer is ever scored in the caller's process. Each score runs in a
fresh child of a warm `gem_core.sandbox.Sandbox` worker that has ``reasoning_gym``
imported already:

- The host sends the dataset (pickled from the host's own object when that is small and
  picklable, else its ``(name, size, seed, config)`` so the child rebuilds it), the entry
  and the answer on the child's stdin (pickle + base64: only the host writes it). The
  global ``random``/``numpy`` generators are seeded from the item first, as the env does
  in process, so scoring is deterministic.
- The child moves its stdout aside before anything runs and points fd 1 at
  ``/dev/null``: what the answer prints never reaches the host. The score comes back as
  one line ``<nonce> {"score": x}`` (JSON) on the moved-aside copy, where the nonce is
  fresh per call; the host parses nothing else and unpickles nothing from the sandbox.
  A missing, repeated or malformed result line is a scorer error.
- Every score has a hard wall-clock timeout (the child and everything it started are
  killed) and CPU, memory, process and file-size limits (`RGScorer`). A timeout, a crash,
  a scorer exception or a sandbox failure is reported in `RGScore` (score 0), never raised.
- A child serves one score and exits, so an answer that monkeypatches scorers, the math
  grader or anything else changes nothing for later scores, and no lock is held while a
  score runs: other threads score in the other workers meanwhile.

What isolation that is depends on the host (`gem_core.sandbox`): with bubblewrap
(``bwrap`` on PATH; Yama is not required) the child has no network, a read-only system,
a private ``/tmp`` and, when the host is root, its own unprivileged uid; without it the
sandbox falls back to a network namespace or rlimits only, warns once with
`gem_core.sandbox.ReducedIsolationWarning`, and the child can read (and, running as the
host's user, write) the host's files. Install bubblewrap for training.

No answer runs as code, even inside its child: the scorers that ``eval`` the answer
(`EVAL_DATASETS`) read it with ``ast.literal_eval`` instead (a literal list still scores; a
program scores as any unreadable answer), and the ``parse_expr`` of the sympy scorers
(`EXPRESSION_DATASETS`) first refuses text that is not a plain math expression (digits,
letters, ``+ - * / ^ ( ) , .``; no attribute access, strings, subscripts, keywords or
builtins; one linear pass). So an answer cannot find the child's nonce or reply channel
and write its own score (which once scored wrong answers 1.0). And the host takes a
score only inside `SCORE_RANGE` (``[0, 1]``, reasoning-gym's documented range): anything
else (``7``, ``1e300``, ``-1``) is a scorer error, reward 0.

Settings of the shared scorer come from the environment: ``GEM_RG_SCORER_WORKERS``
(default 2), ``GEM_RG_SCORER_TIMEOUT`` (seconds per score, default 10) and
``GEM_RG_SCORER_MEMORY_MB`` (default 2048).
"""

from __future__ import annotations

import base64
import json
import math
import os
import pickle
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument, SandboxError
from gem_core.grading._shared import ProcessShared, sized_by_environment

__all__ = [
    "CODE_EVALUATING_DATASETS",
    "EVAL_DATASETS",
    "EXPRESSION_DATASETS",
    "SCORE_RANGE",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_WORKERS",
    "RGScore",
    "RGScorer",
    "get_scorer",
]

DEFAULT_WORKERS = 2
"""Sandbox workers of the shared scorer (override: ``GEM_RG_SCORER_WORKERS``)."""
DEFAULT_TIMEOUT_S = 10.0
"""Wall-clock seconds per score (override: ``GEM_RG_SCORER_TIMEOUT``)."""
DEFAULT_MEMORY_MB = 2048
"""Address space per scoring process, MiB (override: ``GEM_RG_SCORER_MEMORY_MB``);
``reasoning_gym`` with numpy and sympy needs a few hundred."""

EVAL_DATASETS: dict[str, str] = {
    "binary_matrix": "reasoning_gym.algorithmic.binary_matrix",
    "n_queens": "reasoning_gym.games.n_queens",
    "spiral_matrix": "reasoning_gym.algorithmic.spiral_matrix",
    "string_insertion": "reasoning_gym.algorithmic.string_insertion",
}
"""Datasets whose ``score_answer`` calls ``eval(answer)``, and the module whose ``eval`` the
scoring child replaces with a literal-only reader (`ast.literal_eval`)."""

EXPRESSION_DATASETS: dict[str, str] = {
    "countdown": "reasoning_gym.games.countdown",
    "intermediate_integration": "reasoning_gym.algebra.intermediate_integration",
    "polynomial_multiplication": "reasoning_gym.algebra.polynomial_multiplication",
    "puzzle24": "reasoning_gym.games.puzzle24",
    "simple_integration": "reasoning_gym.algebra.simple_integration",
}
"""Datasets whose ``score_answer`` reads the answer with sympy's ``parse_expr`` (which
evaluates Python), and the module it lives in: in the scoring child, the ``parse_expr``
that module calls (its own import, or ``sympy.parse_expr`` through its ``sympy`` name)
first refuses text that is not a plain math expression. sympy itself is left alone."""

CODE_EVALUATING_DATASETS: frozenset[str] = frozenset(EVAL_DATASETS) | frozenset(EXPRESSION_DATASETS)
"""Datasets of reasoning-gym (0.1.19 to 0.1.25) whose ``score_answer`` evaluates the answer
as Python; none of them runs answer code any more (see the module docs)."""

SCORE_RANGE: tuple[float, float] = (0.0, 1.0)
"""The range reasoning-gym documents for ``score_answer``; a score outside it (beyond
float rounding) is a scorer error, reward 0."""

# What an expression answer may name (besides symbols of at most 3 characters that are not
# in _NOT_NAMES): sympy's functions and constants a math answer uses.
_MATH_NAMES = frozenset(
    "sin cos tan cot sec csc asin acos atan acot asec acsc atan2 sinh cosh tanh coth sech csch "
    "asinh acosh atanh exp log ln sqrt cbrt root Abs sign floor ceiling factorial binomial gamma "
    "erf pi oo zoo Rational Integer Float".split()
)
# Short names that must not be read as symbols: Python keywords and builtins of <= 3 letters.
_NOT_NAMES = frozenset(
    "and as def del for if in is not or try abs all any bin chr dir hex id int len map max min "
    "oct ord pow set str sum zip".split()
) - _MATH_NAMES

# numpy.random is lazy in numpy 2 (13 ms to import in each child otherwise).
_PRELOAD = (
    "reasoning_gym", "numpy", "numpy.random", "sympy", "sympy.parsing.sympy_parser", "base64",
    "json", "pickle", "random",
)
_MAX_DATASET_PICKLE = 1 << 20  # bigger datasets are rebuilt in the child instead of shipped
_MAX_RESULT_LINE = 2000
_ERROR_CHARS = 300

# Runs as __main__ in the sandbox child, where gem_core is not importable: stdlib and
# reasoning_gym only. stdin: "<dataset pickle, base64, or empty>\n<request pickle, base64>".
_CHILD_SOURCE = r'''
import os, sys
_result_fd = os.dup(1)
_null = os.open(os.devnull, os.O_RDWR)
os.dup2(_null, 1)
os.close(_null)
import base64, json, pickle, random

_dataset_b64, _, _request_b64 = sys.stdin.read().partition("\n")
_request = pickle.loads(base64.b64decode(_request_b64))
_nonce = _request.pop("nonce")


def _reply(obj):
    os.write(_result_fd, ("\n" + _nonce + " " + json.dumps(obj) + "\n").encode())


def _literal_eval(text, *args, **kwargs):
    """`eval` for the scorers that eval the answer: Python literals only, no code."""
    import ast

    if args or kwargs or not isinstance(text, str):
        raise ValueError("only a literal answer is read")
    return ast.literal_eval(text)


_MATH_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+-*/^()., \t")
_MATH_NAMES = frozenset(<<MATH_NAMES>>)
_NOT_NAMES = frozenset(<<NOT_NAMES>>)


def _math_refusal(text):
    """Why ``text`` is not a plain math expression (None: it is). One pass, no regex: only
    digits, letters, + - * / ^ ( ) , . and spaces; a dot only in a number; names only short
    symbols or the math functions of `_MATH_NAMES`, never a keyword or builtin."""
    if not isinstance(text, str):
        return "not text"
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c not in _MATH_CHARS:
            return "character " + repr(c)
        if c.isalpha():
            j = i
            while j < n and text[j].isalnum():
                j += 1
            name = text[i:j]
            if name not in _MATH_NAMES and (len(name) > 3 or name in _NOT_NAMES):
                return "name " + repr(name[:20])
            i = j
            continue
        if c == "." and not ((i > 0 and text[i - 1].isdigit()) or (i + 1 < n and text[i + 1].isdigit())):
            return "a dot outside a number"
        if c == "." and i + 1 < n and text[i + 1].isalpha():
            return "a dot before a name"
        i += 1
    return None


def _guarded(parse):
    def parse_expr(text, *args, **kwargs):
        why = _math_refusal(text)
        if why is not None:
            raise ValueError("not a math expression (" + why + ")")
        return parse(text, *args, **kwargs)

    return parse_expr


def _no_answer_code():
    """No answer runs as code: the eval scorers read literals, parse_expr reads math only."""
    import importlib

    for module in <<EVAL_MODULES>>:
        importlib.import_module(module).eval = _literal_eval
    import types

    import sympy
    import sympy.parsing.sympy_parser as parser

    guarded = _guarded(parser.parse_expr)

    class _SympyView(types.ModuleType):
        def __getattr__(self, name):
            return getattr(sympy, name)

    view = _SympyView("sympy")
    view.parse_expr = guarded
    for name in <<EXPRESSION_MODULES>>:
        module = importlib.import_module(name)
        for attr, value in list(vars(module).items()):
            if value is parser.parse_expr:
                setattr(module, attr, guarded)
            elif value is sympy:
                setattr(module, attr, view)


def _seed(value):
    random.seed(value)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(value)


try:
    import reasoning_gym

    if _dataset_b64:
        _dataset = pickle.loads(base64.b64decode(_dataset_b64))
    else:
        _seed(_request["build_seed"])
        _dataset = reasoning_gym.create_dataset(
            _request["name"], size=_request["size"], seed=_request["seed"], **_request["config"]
        )
    if _request.get("debug_source"):
        _debug = {}
        exec(_request["debug_source"], _debug)
        _dataset.score_answer = _debug["score_answer"]
    _no_answer_code()
    _seed(_request["score_seed"])
    _raw = _dataset.score_answer(answer=_request["answer"], entry=_request["entry"])
    try:
        _score = float(_raw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"score_answer returned {_raw!r:.100}, not a number: {e}") from None
    _reply({"score": _score})
except BaseException as e:
    _reply({"error": f"{type(e).__name__}: {str(e)[:_ERROR_CHARS]}"})
'''.replace("_ERROR_CHARS", str(_ERROR_CHARS)).replace(
    "<<EVAL_MODULES>>", repr(sorted(EVAL_DATASETS.values()))
).replace("<<EXPRESSION_MODULES>>", repr(sorted(EXPRESSION_DATASETS.values()))).replace("<<MATH_NAMES>>", repr(sorted(_MATH_NAMES))).replace("<<NOT_NAMES>>", repr(sorted(_NOT_NAMES)))


@dataclass(frozen=True, slots=True)
class RGScore:
    """The outcome of one sandboxed score.

    Attributes:
        score: the dataset's score (a finite float); 0.0 when ``error`` is set.
        error: why the answer could not be scored (``"Type: message"`` of a scorer
            exception, a non-finite or non-numeric score, a timeout, a crash, a sandbox
            failure), else ``None``.
        timed_out: the score exceeded its timeout and its process was killed.
        seconds: wall time of the call, waiting for a free worker included.
    """

    score: float
    error: str | None = None
    timed_out: bool = False
    seconds: float = 0.0


class RGScorer:
    """Scores ReasoningGym answers in a lazily started `gem_core.sandbox.Sandbox`.

    Thread-safe: each call takes one sandbox worker (waiting while all are busy); nothing
    else is shared or locked while an answer is scored. Normally one instance serves the
    whole process: use `get_scorer`.

    Args:
        workers: sandbox workers, i.e. concurrent scores (>= 1).
        timeout: default wall-clock seconds per score; the scoring process is killed when
            it passes.
        memory_mb: address space per scoring process, MiB (>= 256).

    Raises:
        InvalidArgument: a non-positive ``workers`` or ``timeout``, or a small ``memory_mb``.
    """

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        timeout: float = DEFAULT_TIMEOUT_S,
        *,
        memory_mb: int = DEFAULT_MEMORY_MB,
    ):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgument(f"RGScorer(workers=...) must be an int >= 1, got {workers!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidArgument(
                f"RGScorer(timeout=...) must be a positive number of seconds, got {timeout!r}"
            )
        if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb < 256:
            raise InvalidArgument(
                f"RGScorer(memory_mb=...) must be an int >= 256 (MiB), got {memory_mb!r}; "
                f"the default is {DEFAULT_MEMORY_MB}"
            )
        self.workers = workers
        self.timeout = float(timeout)
        self.memory_mb = memory_mb
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._sandbox: Any = None
        self._warming = False
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    @property
    def isolation(self) -> str | None:
        """The sandbox's isolation level (``None`` before the first score)."""
        return None if self._sandbox is None else self._sandbox.isolation

    def _get_sandbox(self) -> Any:
        with self._lock:
            if self._closed:
                raise SandboxError("the rg scorer is closed; use gem_core.grading.rg.get_scorer()")
            if self._sandbox is None:
                from gem_core.sandbox import Sandbox

                self._sandbox = Sandbox(
                    size=self.workers,
                    memory_mb=self.memory_mb,
                    cpu_s=self.timeout + 1,
                    timeout_s=self.timeout,
                    preload=list(_PRELOAD),
                )
            return self._sandbox

    def prestart(self) -> None:
        """Start the sandbox workers in the background (once), so the first score is fast."""
        with self._lock:
            if self._warming or self._closed:
                return
            self._warming = True

        def warm() -> None:
            try:
                self._get_sandbox().warm_up()
            except Exception:  # noqa: BLE001 - the first score reports the problem
                pass

        threading.Thread(target=warm, name="gem-rg-scorer-warm-up", daemon=True).start()

    def score(
        self,
        *,
        name: str,
        answer: str,
        entry: dict[str, Any],
        size: int,
        seed: int,
        config: dict[str, Any],
        score_seed: int,
        build_seed: int,
        dataset_pickle: str | None = None,
        timeout: float | None = None,
        _debug_source: str | None = None,
    ) -> RGScore:
        """Score ``answer`` for ``entry`` of dataset ``name`` in a fresh sandboxed child.

        Args:
            name, size, seed, config: the dataset, rebuilt in the child with
                ``reasoning_gym.create_dataset`` (global generators seeded with
                ``build_seed``) unless ``dataset_pickle`` is given.
            answer: the extracted answer text.
            entry: the dataset entry (question, answer, metadata).
            score_seed: the seed of the global ``random``/``numpy`` generators while
                ``score_answer`` runs.
            build_seed: their seed while the dataset is rebuilt.
            dataset_pickle: the dataset object, pickled and base64-encoded by the host
                (see `dataset_pickle`).
            timeout: wall-clock seconds (default: the scorer's ``timeout``).
            _debug_source: testing only: Python source defining
                ``score_answer(answer, entry)``, used in place of the dataset's.

        Returns:
            An `RGScore`; problems are reported in it, never raised.
        """
        start = time.perf_counter()
        limit = self.timeout if timeout is None else float(timeout)
        nonce = secrets.token_hex(16)
        try:
            request = base64.b64encode(
                pickle.dumps(
                    {
                        "nonce": nonce,
                        "name": name,
                        "size": size,
                        "seed": seed,
                        "config": config,
                        "entry": entry,
                        "answer": answer,
                        "score_seed": score_seed,
                        "build_seed": build_seed,
                        "debug_source": _debug_source,
                    },
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
            ).decode("ascii")
        except Exception as e:  # noqa: BLE001 - e.g. an entry holding a lambda
            return self._failed(f"the entry cannot be sent to the scorer: {type(e).__name__}: {e}", start)
        sandbox = None
        try:
            sandbox = self._get_sandbox()
            result = sandbox.run(_CHILD_SOURCE, stdin=f"{dataset_pickle or ''}\n{request}", timeout=limit)
        except Exception as e:  # noqa: BLE001 - no sandbox here, or it broke or was closed
            if sandbox is not None:
                self._replace(sandbox)
            return self._failed(f"the scoring sandbox is unavailable: {type(e).__name__}: {e}", start)
        if result.timed_out:
            return RGScore(
                0.0,
                error=f"scoring took longer than {limit:g} s; its process was killed",
                timed_out=True,
                seconds=time.perf_counter() - start,
            )
        if result.sandbox_error:
            return self._failed(f"sandbox failure: {result.sandbox_error}", start)
        return self._parse(result, nonce, start)

    def _replace(self, sandbox: Any) -> None:
        """Drop a sandbox whose `run` raised, so the next score starts a fresh one."""
        with self._lock:
            if self._sandbox is not sandbox:
                return
            self._sandbox = None
            self._warming = False
        try:
            sandbox.close()
        except Exception:  # noqa: BLE001 - it is broken already
            pass

    @staticmethod
    def _failed(error: str, start: float) -> RGScore:
        return RGScore(0.0, error=error[:_ERROR_CHARS + 200], seconds=time.perf_counter() - start)

    def _parse(self, result: Any, nonce: str, start: float) -> RGScore:
        prefix = nonce + " "
        lines = [line for line in result.stdout.split("\n") if line.startswith(prefix)]
        if len(lines) != 1:
            if lines:
                why = f"{len(lines)} result lines"
            else:
                tail = " | ".join(result.stderr.strip().splitlines()[-3:])[-_ERROR_CHARS:]
                why = f"exit code {result.exit_code}" + (f", stderr: {tail}" if tail else "")
            return self._failed(f"the scoring process gave no single result ({why})", start)
        body = lines[0][len(prefix) :]
        try:
            if len(body) > _MAX_RESULT_LINE:
                raise ValueError(f"{len(body)} characters")
            reply = json.loads(body)
            if not isinstance(reply, dict):
                raise ValueError("not an object")
        except Exception as e:  # noqa: BLE001 - e.g. RecursionError on nested brackets
            return self._failed(f"malformed result line from the scoring process ({type(e).__name__}: {e})", start)
        if "error" in reply:
            return self._failed(str(reply["error"]), start)
        score = reply.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            return self._failed(f"ValueError: score_answer returned {score!r}, not a finite number", start)
        low, high = SCORE_RANGE
        if not low - 1e-9 <= score <= high + 1e-9:
            return self._failed(f"ValueError: score_answer returned {score!r}, outside [{low:g}, {high:g}]", start)
        return RGScore(min(max(float(score), low), high), seconds=time.perf_counter() - start)

    def close(self) -> None:
        """Stop the sandbox. Safe to call twice; later scores report an error."""
        with self._lock:
            self._closed = True
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None and os.getpid() == self._pid:
            sandbox.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.workers} workers"
        return f"<RGScorer {state}, timeout {self.timeout:g} s, isolation {self.isolation}>"


def dataset_pickle(dataset: Any) -> str | None:
    """``dataset`` pickled and base64-encoded for `RGScorer.score`, or ``None`` when it does
    not pickle or its pickle is over 1 MiB (the child then rebuilds it)."""
    try:
        data = pickle.dumps(dataset, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - e.g. lambdas in the dataset
        return None
    if len(data) > _MAX_DATASET_PICKLE:
        return None
    return base64.b64encode(data).decode("ascii")


# --- the process-wide instance ---------------------------------------------------------------
_SHARED: ProcessShared[RGScorer] = ProcessShared(
    sized_by_environment(
        RGScorer, "GEM_RG_SCORER", workers=DEFAULT_WORKERS, timeout=DEFAULT_TIMEOUT_S, memory_mb=DEFAULT_MEMORY_MB
    )
)


def get_scorer() -> RGScorer:
    """The process-wide `RGScorer` every rg env uses (created on first call; its sandbox
    starts on the first score or `RGScorer.prestart`).

    A closed shared scorer, or one inherited across a fork, is replaced by a new one (the
    parent's sandbox is left to the parent).
    """
    return _SHARED.get()
