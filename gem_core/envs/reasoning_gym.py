"""ReasoningGym tasks as single-turn envs (``rg:<name>``), with the static list of dataset names.

`reasoning_gym <https://github.com/open-thought/reasoning-gym>`_ generates reasoning
tasks procedurally and scores answers with each dataset's own ``score_answer``, which for
several datasets runs the answer as Python; so answers are scored in a sandboxed child
process per score, never in this one (`gem_core.grading.rg`; full isolation needs
bubblewrap, see `ReasoningGymEnv`). Every
dataset of the supported package version is registered as ``rg:<name>`` (size 500,
seed 42, as in the reference GEM) from `DATASET_NAMES`, a static tuple: registering
must not import ``reasoning_gym`` (≈1.6 s). ``tests/envs/test_reasoning_gym.py`` fails
when the tuple drifts from ``reasoning_gym.factory.DATASETS`` of the installed package.

Known problems of reasoning-gym 0.1.25, found by feeding every dataset its own
reference answers (``tests/envs/test_reasoning_gym.py`` keeps these tables honest):

- `EXCLUDED`: datasets that cannot be built as a plain env; not registered.
- `NO_REFERENCE_ANSWER`: datasets whose entries carry ``answer=None`` (many answers are
  valid and the scorer checks a proposed one); registered. Where the entry's metadata
  holds an example solution, the table names its key.
- `HASH_SEED_DEPENDENT`: datasets whose items depend on ``PYTHONHASHSEED`` (set or
  dict-of-hash ordering inside the generator); registered. Same seed ⇒ same task only
  between processes that share ``PYTHONHASHSEED`` (forked workers do; set the variable
  for spawned ones).
- Some generators draw from (or re-seed) the *global* ``random``/``numpy`` generators.
  The env runs every call into ``reasoning_gym`` with the global generators seeded from
  the item and restores them afterwards (see `ReasoningGymEnv`), which makes those
  items deterministic and leaves the caller's global state alone.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import random
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from gem_core.core import Env
from gem_core.errors import (
    DependencyNotInstalled,
    EnvConstructionError,
    InvalidArgument,
    ResetNeeded,
    check_positive_int,
    import_optional,
)
from gem_core.grading.extract import boxed_span, tagged_span
from gem_core.grading.rg import RGScore, dataset_pickle, get_scorer

__all__ = [
    "ReasoningGymEnv",
    "DATASET_NAMES",
    "EXCLUDED",
    "NO_REFERENCE_ANSWER",
    "HASH_SEED_DEPENDENT",
    "REGISTERED_NAMES",
    "SUPPORTED_VERSION",
    "DEFAULT_INSTRUCTION",
    "extract_answer",
    "reference_action",
    "clear_dataset_cache",
]

SUPPORTED_VERSION = "0.1.25"
"""The ``reasoning-gym`` version `DATASET_NAMES` was taken from (0.1.19 has 102 of these
names, 0.1.23 104; a name the installed package lacks fails with a clear error)."""

# sorted(reasoning_gym.factory.DATASETS) of reasoning-gym 0.1.25.
DATASET_NAMES: tuple[str, ...] = (
    "ab", "acre", "advanced_geometry", "aiw", "arc_1d", "arc_agi", "base_conversion",
    "basic_arithmetic", "bf", "binary_alternation", "binary_matrix", "bitwise_arithmetic",
    "boxnet", "caesar_cipher", "calendar_arithmetic", "chain_sum", "circuit_logic", "codeio",
    "coin_flip", "color_cube_rotation", "complex_arithmetic", "composite", "count_bits",
    "count_primes", "countdown", "course_schedule", "cryptarithm", "decimal_arithmetic",
    "decimal_chain_sum", "dice", "emoji_mystery", "family_relationships", "figlet_font",
    "fraction_simplification", "futoshiki", "game_of_life", "game_of_life_halting", "gcd",
    "graph_color", "group_anagrams", "gsm_symbolic", "intermediate_integration",
    "isomorphic_strings", "jugs", "kakurasu", "knight_swap", "knights_knaves",
    "largest_island", "lcm", "leg_counting", "letter_counting", "letter_jumble",
    "list_functions", "mahjong_puzzle", "manipulate_matrix", "maze", "mini_sudoku",
    "modulo_grid", "n_queens", "needle_haystack", "number_filtering", "number_format",
    "number_sequence", "number_sorting", "palindrome_generation", "palindrome_partitioning",
    "path_star", "polynomial_equations", "polynomial_multiplication", "pool_matrix",
    "power_function", "prime_factorization", "products", "propositional_logic", "puzzle24",
    "quantum_lock", "ransom_note", "rearc", "rectangle_count", "rotate_matrix",
    "rotten_oranges", "rubiks_cube", "rush_hour", "self_reference", "sentence_reordering",
    "shortest_path", "simple_equations", "simple_geometry", "simple_integration", "sokoban",
    "spell_backward", "spiral_matrix", "string_insertion", "string_manipulation",
    "string_splitting", "string_synthesis", "sudoku", "survo", "syllogism",
    "time_intervals", "tower_of_hanoi", "tsumego", "word_ladder", "word_sequence_reversal",
    "word_sorting", "zebra_puzzles",
)  # fmt: skip

EXCLUDED: dict[str, str] = {
    "composite": (
        "not a task but a mixer: create_dataset('composite') fails ('Must specify at least one "
        "dataset') without a config listing sub-datasets; mix rg:* ids with "
        "make_vec({id: weight, ...}) instead"
    ),
}
"""Datasets that are not registered, with the reason."""

NO_REFERENCE_ANSWER: dict[str, str | None] = {
    "boxnet": None,
    "graph_color": "possible_answer",
    "propositional_logic": "example_answer",
    "rubiks_cube": "example_correct_answer",
    "rush_hour": None,
}
"""Datasets whose entries have ``answer=None``: name -> the metadata key holding an
example solution (``None``: no solution is shipped, the scorer is unverified here)."""

HASH_SEED_DEPENDENT: frozenset[str] = frozenset(
    {
        "intermediate_integration",  # rarely (sympy term order): items 21, 22, 33 of 0..49
        "isomorphic_strings",
        "knight_swap",
        "polynomial_multiplication",
        "ransom_note",
        "word_ladder",
    }
)
"""Datasets whose items change with ``PYTHONHASHSEED`` (see the module docstring); found
by comparing items 0..49 (size 500, seed 42) of every dataset under two hash seeds."""

REGISTERED_NAMES: tuple[str, ...] = tuple(n for n in DATASET_NAMES if n not in EXCLUDED)
"""The names registered as ``rg:<name>``."""

DEFAULT_INSTRUCTION = (
    "Give your final answer inside \\boxed{} or between <answer> and </answer> tags."
)
"""Appended to every question (pass ``instruction=""`` to leave the question as is)."""

_BOX_OPEN = "\\boxed{"
_SCORE_TOLERANCE = 1e-9
# One lock for every call into reasoning_gym in this process (item generation; scoring
# runs in the sandbox): those calls swap the process-global random/numpy states (and
# stdout), which must not interleave across threads.
_RG_LOCK = threading.RLock()
_DATASETS: dict[tuple[Any, ...], _SharedDataset] = {}
_DATASETS_LOCK = threading.Lock()
_ENTRY_CACHE_SIZE = 2048


def extract_answer(text: str) -> str | None:
    r"""The final answer in a model response, stripped; ``None`` when there is none.

    The answer is the last complete ``<answer>...</answer>`` block or the last complete
    ``\boxed{...}`` (`gem_core.grading.extract`: braces may nest, ``\fbox`` counts),
    whichever ends later in the text. A tagged answer that is itself exactly one
    ``\boxed{...}`` is unwrapped.

    >>> extract_answer(r"so \boxed{x^{2}} ... <answer>7</answer>")
    '7'
    >>> extract_answer(r"<answer> \boxed{1 2} </answer> and \boxed{3")
    '1 2'
    """
    tagged = tagged_span(text)
    boxed = boxed_span(text)
    if tagged is None and boxed is None:
        return None
    if boxed is None or (tagged is not None and tagged[1] >= boxed[1]):
        answer = text[tagged[0] : tagged[1]].strip()  # type: ignore[index]
        if answer.startswith(_BOX_OPEN) and answer.endswith("}") and answer.count(_BOX_OPEN) == 1:
            inner = boxed_span(answer)
            if inner is not None and inner[1] == len(answer) - 1:
                answer = answer[inner[0] : inner[1]].strip()
        return answer
    return text[boxed[0] : boxed[1]].strip()


def reference_action(entry: dict[str, Any], name: str | None = None) -> str | None:
    """An action that a correct solver would send for ``entry``: its answer in tags.

    Uses ``entry["answer"]``, or, for the datasets of `NO_REFERENCE_ANSWER`, the
    example solution in the entry's metadata. ``None`` when the entry has neither.
    """
    answer = entry.get("answer")
    if answer is None and name is not None and NO_REFERENCE_ANSWER.get(name):
        answer = entry.get("metadata", {}).get(NO_REFERENCE_ANSWER[name])
    if answer is None:
        return None
    if not isinstance(answer, str):
        answer = json.dumps(answer)
    return f"<answer>{answer}</answer>"


def _import_reasoning_gym() -> Any:
    return import_optional("reasoning_gym", extra="reasoning", purpose="the ReasoningGym envs (rg:*)")


def _installed_version(rg: Any) -> str:
    """The installed distribution's version (the package's ``__version__`` can be stale)."""
    from importlib import metadata

    try:
        return metadata.version("reasoning_gym")
    except metadata.PackageNotFoundError:
        return str(getattr(rg, "__version__", "(unknown version)"))


def _check_installed(rg: Any, name: str) -> None:
    """Raise `EnvConstructionError` when the installed reasoning_gym has no dataset ``name``."""
    datasets = getattr(getattr(rg, "factory", None), "DATASETS", None)
    if datasets is None or name in datasets:
        return
    raise EnvConstructionError(
        f"rg:{name}: the installed reasoning-gym {_installed_version(rg)} has no dataset {name!r} (gem_core's "
        f"rg:* ids are those of reasoning-gym {SUPPORTED_VERSION}). Upgrade it with: "
        f"pip install 'reasoning-gym>={SUPPORTED_VERSION}'"
    )


def _item_seed(seed: int, idx: int) -> int:
    """The seed of the global generators while item ``idx`` is generated or scored."""
    return (seed * 1_000_003 + idx) % (2**32)


@contextlib.contextmanager
def _isolated_globals(global_seed: int) -> Iterator[None]:
    """Seed the global ``random``/``numpy`` generators, silence stdout; restore all after.

    Must be entered with ``_RG_LOCK`` held.
    """
    np = sys.modules.get("numpy")  # reasoning_gym imports numpy; never import it here
    py_state = random.getstate()
    np_state = np.random.get_state() if np is not None else None
    random.seed(global_seed)
    if np is not None:
        np.random.seed(global_seed)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        random.setstate(py_state)
        if np is not None and np_state is not None:
            np.random.set_state(np_state)


class _SharedDataset:
    """One ``reasoning_gym`` dataset per (name, size, seed, config) per process, shared
    by every env that uses it, with an LRU cache of generated entries."""

    def __init__(self, name: str, size: int, seed: int, config: dict[str, Any]):
        rg = _import_reasoning_gym()
        _check_installed(rg, name)
        self.name = name
        self.size = size
        self.seed = seed
        with _RG_LOCK, _isolated_globals(_item_seed(seed, 0)):
            self.dataset = rg.create_dataset(name, size=size, seed=seed, **config)
        self.config = dict(config)
        self._entries: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._pickle: str | None | bool = False  # False: not computed yet
        self.debug_scorer_source: str | None = None
        """Testing only: source of a ``score_answer(answer, entry)`` used in the child."""

    def entry(self, idx: int) -> dict[str, Any]:
        with _RG_LOCK:
            cached = self._entries.get(idx)
            if cached is None:
                with _isolated_globals(_item_seed(self.seed, idx)):
                    cached = self.dataset[idx]
                self._entries[idx] = cached
                if len(self._entries) > _ENTRY_CACHE_SIZE:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(idx)
            return cached

    def score(
        self, answer: str, entry: dict[str, Any], *, index: int | None, timeout: float | None
    ) -> RGScore:
        """Score in the process-wide `gem_core.grading.rg` sandbox (never in this process;
        no lock is held meanwhile)."""
        return get_scorer().score(
            name=self.name,
            answer=answer,
            entry=entry,
            size=self.size,
            seed=self.seed,
            config=self.config,
            score_seed=_item_seed(self.seed, index or 0),
            build_seed=_item_seed(self.seed, 0),
            dataset_pickle=self._pickled(),
            timeout=timeout,
            _debug_source=self.debug_scorer_source,
        )

    def _pickled(self) -> str | None:
        """The host's dataset object for the scoring child (pickled once; ``None``: the
        child rebuilds it from name, size, seed and config)."""
        if self._pickle is False:
            with _RG_LOCK:
                if self._pickle is False:
                    self._pickle = dataset_pickle(self.dataset)
        return self._pickle  # type: ignore[return-value]


def _shared_dataset(name: str, size: int, seed: int, config: dict[str, Any]) -> _SharedDataset:
    key = (name, size, seed, json.dumps(config, sort_keys=True, default=repr))
    with _DATASETS_LOCK:
        shared = _DATASETS.get(key)
    if shared is None:
        built = _SharedDataset(name, size, seed, config)
        with _DATASETS_LOCK:
            shared = _DATASETS.setdefault(key, built)
    return shared


def clear_dataset_cache() -> None:
    """Forget every shared dataset and its cached entries (tests, long-lived processes)."""
    with _DATASETS_LOCK:
        _DATASETS.clear()


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise InvalidArgument(f"name must be a reasoning_gym dataset name (str), got {name!r}")
    if name in EXCLUDED:
        raise InvalidArgument(f"reasoning_gym dataset {name!r} is not supported: {EXCLUDED[name]}")
    if name in DATASET_NAMES:
        return name
    known = set(DATASET_NAMES)
    with contextlib.suppress(DependencyNotInstalled):
        from reasoning_gym.factory import DATASETS  # a newer package may have more

        known |= set(DATASETS)
    if name not in known:
        close = difflib.get_close_matches(name, sorted(known), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise InvalidArgument(
            f"unknown reasoning_gym dataset {name!r}; expected one of the {len(known)} names of "
            f"reasoning_gym.factory.DATASETS (gem_core.envs.reasoning_gym.DATASET_NAMES).{hint}"
        )
    return name


class ReasoningGymEnv(Env[str, str]):
    r"""A ReasoningGym dataset as a single-turn env (a contextual bandit).

    Items: ``reasoning_gym.create_dataset(name, size=size, seed=seed, **config)`` is built
    once per (name, size, seed, config) per process and shared by every env using it
    (the reference GEM builds one per env); generated items are cached (LRU, 2048 per
    dataset). Item generation (no model text involved) runs in this process under one
    process-wide lock with the global ``random``/``numpy`` generators seeded from the
    item and restored afterwards, and with stdout silenced: some generators use the
    global generators, and this keeps their items deterministic and the caller's state
    untouched.

    Scoring isolation: answers are never scored in this process. Several datasets'
    ``score_answer`` would run the answer as Python (``eval``, sympy ``parse_expr``; see
    `gem_core.grading.rg.CODE_EVALUATING_DATASETS`: there they read literals or plain math
    only, and scores outside ``[0, 1]`` are scorer errors), and each score runs in a fresh child of
    a shared `gem_core.sandbox.Sandbox` (`gem_core.grading.rg.get_scorer`: 2 workers with
    ``reasoning_gym`` pre-imported, started in the background at the first ``reset``),
    with a hard wall-clock timeout (``score_timeout``), CPU/memory/process limits, stdout
    of the answer discarded and the score returned as one nonce-tagged JSON line. A child
    scores once and exits: an answer cannot change later scores (of rg or math envs), and
    no lock is held while it runs. With bubblewrap installed (``bwrap`` on PATH) the child
    has no network, a read-only system, a private ``/tmp`` and an unprivileged uid;
    without it the sandbox falls back to a network namespace or rlimits only (warning
    once with `gem_core.sandbox.ReducedIsolationWarning`) and the child sees the host's
    files with the host user's rights, so install bubblewrap for training. Residual
    limit: an answer that is Python run by an evaluating scorer acts inside its own
    scoring child and can sway that one score.

    Episode selection: ``reset(seed=s)`` plays item ``s % size`` (so seeds
    ``0 .. size-1`` enumerate the dataset once; same seed ⇒ same task in any process,
    except for `HASH_SEED_DEPENDENT` datasets); ``reset()`` without a seed draws the item
    from the env's generator (deterministic after a seeded reset);
    ``reset(options={"index": i})`` plays item ``i`` (``0 <= i < size``).

    Observation: the item's question, then a blank line and ``instruction``.
    Action: text; the answer is the last complete ``<answer>...</answer>`` block or the
        last complete ``\boxed{...}``, whichever ends later (`extract_answer`), stripped.
    Rewards: the dataset's ``score_answer(answer, entry)`` (usually in [0, 1]; partial
        credit exists for some datasets). No answer found, a non-text action, or an answer
        longer than ``max_answer_chars``: ``format_penalty`` (default 0.0) and
        ``info["format_error"]=True``. A scorer that raises or returns a non-number, a
        crash of the scoring process, a sandbox failure or a timeout gives 0.0 with
        ``info["scorer_error"]`` (``"Type: message"`` for scorer exceptions); a timeout
        also sets ``info["scorer_timeout"]=True``. ``step`` never raises for these.
    Episode end: the first step terminates (``terminated=True, truncated=False``);
        ``info["success"]`` is ``score >= 1 - 1e-9``. Step info also holds ``score``,
        ``parsed_action``, ``format_error``, ``invalid_action`` and ``reference_answer``
        (``entry["answer"]``). Reset info holds ``rg_dataset`` and ``index``.

    Args:
        name: a ``reasoning_gym.factory.DATASETS`` name (not in `EXCLUDED`).
        size: the dataset size (items ``0 .. size-1``).
        seed: the dataset seed (the reference GEM uses 42).
        config: extra config fields of the dataset (e.g. difficulty ranges), passed to
            ``create_dataset``.
        instruction: text appended to each question (``""``: none).
        max_answer_chars: longer extracted answers are a format error (they never reach
            the scorer, some of which are super-linear).
        format_penalty: the reward for a format error.
        score_timeout: wall-clock seconds one score may take (``None``: the shared
            scorer's, 10 s unless ``GEM_RG_SCORER_TIMEOUT`` says otherwise).

    Raises:
        DependencyNotInstalled: ``reasoning_gym`` is missing
            (``pip install "gem-core[reasoning]"``).
        InvalidArgument: an unknown or excluded name, or a bad ``size``/``seed``.

    Version history: rg:<name> — ids, size 500 and seed 42 of the reference GEM; answers
    in ``<answer>`` tags accepted besides ``\boxed{}``; item ``seed % size`` on seeded
    reset (the reference picks a random item from the global generator); answers scored in
    a sandboxed child with a timeout (the reference scores in process, without one).
    """

    metadata = {"category": "rg"}

    def __init__(
        self,
        name: str,
        size: int = 500,
        seed: int = 42,
        *,
        config: dict[str, Any] | None = None,
        instruction: str = DEFAULT_INSTRUCTION,
        max_answer_chars: int = 50_000,
        format_penalty: float = 0.0,
        score_timeout: float | None = None,
    ):
        self.name = _check_name(name)
        check_positive_int("size", size)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InvalidArgument(f"seed must be a non-negative int, got {seed!r}")
        if config is not None and not isinstance(config, dict):
            raise InvalidArgument(
                f"config must be a dict of {name!r} config fields or None, got {type(config).__name__}"
            )
        if not isinstance(instruction, str):
            raise InvalidArgument(f"instruction must be a str, got {type(instruction).__name__}")
        check_positive_int("max_answer_chars", max_answer_chars)
        if score_timeout is not None and (
            isinstance(score_timeout, bool)
            or not isinstance(score_timeout, (int, float))
            or not score_timeout > 0
        ):
            raise InvalidArgument(
                f"score_timeout must be a positive number of seconds or None, got {score_timeout!r}"
            )
        self.size = size
        self.seed = seed
        self.score_timeout = None if score_timeout is None else float(score_timeout)
        self.config = dict(config or {})
        self.instruction = instruction
        self.max_answer_chars = max_answer_chars
        self.format_penalty = float(format_penalty)
        self._data = _shared_dataset(self.name, size, seed, self.config)
        self.index: int | None = None
        self.entry: dict[str, Any] | None = None
        self._done = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        index = None if options is None else options.get("index")
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.size:
                raise InvalidArgument(
                    f"reset(options={{'index': ...}}) expects an int in [0, {self.size}), got {index!r}"
                )
        elif seed is not None:
            index = seed % self.size
        else:
            index = self.rng.randrange(self.size)
        self.index = index
        self.entry = self._data.entry(index)
        get_scorer().prestart()  # the scoring sandbox starts while the agent thinks
        self._done = False
        question = str(self.entry["question"])
        obs = f"{question}\n\n{self.instruction}" if self.instruction else question
        return obs, {"rg_dataset": self.name, "index": index}

    def step(self, action: str):
        entry = self.entry
        if entry is None or self._done:
            when = "before reset()" if entry is None else "after the episode ended"
            raise ResetNeeded(f"{self}: step() called {when}; call env.reset() first")
        self._done = True
        info: dict[str, Any] = {
            "turn": 1,
            "success": False,
            "score": 0.0,
            "format_error": False,
            "invalid_action": False,
            "reference_answer": entry.get("answer"),
        }
        answer = extract_answer(action) if isinstance(action, str) else None
        info["parsed_action"] = answer
        if answer is None or len(answer) > self.max_answer_chars:
            info["format_error"] = info["invalid_action"] = True
            if answer is None:
                what = (
                    "no answer" if isinstance(action, str) else f"a {type(action).__name__} action"
                )
                obs = (
                    f"Format error: got {what}; expected the final answer inside \\boxed{{...}} "
                    "or <answer>...</answer>. Score: 0."
                )
            else:
                info["parsed_action"] = answer[:200] + "..."
                obs = (
                    f"Format error: the answer has {len(answer)} characters, over the limit of "
                    f"{self.max_answer_chars}. Score: 0."
                )
            return obs, self.format_penalty, True, False, info
        result = self._data.score(answer, entry, index=self.index, timeout=self.score_timeout)
        score = result.score
        if result.error is not None:  # a scorer bug, a timeout or a crash ends nothing else
            info["scorer_error"] = result.error
            score = 0.0
        if result.timed_out:
            info["scorer_timeout"] = True
        info["score"] = score
        info["success"] = score >= 1.0 - _SCORE_TOLERANCE
        verdict = "correct" if info["success"] else "not fully correct"
        return f"Your answer is {verdict}. Score: {score:.3g}.", score, True, False, info

    def sample_random_action(self) -> str:
        """Half the time the item's reference answer in tags (when it has one), else a
        random small number in ``\\boxed{}``."""
        if self.entry is not None and self.rng.random() < 0.5:
            action = reference_action(self.entry, self.name)
            if action is not None:
                return action
        return f"\\boxed{{{self.rng.randint(0, 99)}}}"
