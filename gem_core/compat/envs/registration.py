"""Reference-GEM registry calls on gem_core's registry: `make`, `register`, `make_vec`, `print_envs`.

Mirrors ``gem.envs.registration``. Every env is a gem_core env (``gem_core.make``); this
module only translates the reference's arguments:

- ``make(env_id, **kwargs)``: the reference's ``env_id=`` keyword; constructor kwargs the
  reference envs swallow (`REFERENCE_ONLY_KWARGS`) are dropped with one debug log line,
  except ``seed``, which seeds the first reset; ``max_turns`` is dropped for the
  families that are single-turn in the reference (`SINGLE_TURN_FAMILIES`); any other
  unknown kwarg still raises gem_core's `InvalidKwarg` naming the env id and the kwarg.
- ``register(env_id, entry_point, **kwargs)``: extra keywords are constructor kwargs;
  reference-style classes (``reset(self, seed=None)``, any base class) are adapted.
- the eleven plain ``game:*-v0`` ids of gem-llm 0.0.4 (`LEGACY_ALIASES`), which ROLL's
  configs name, resolve to the gem_core game with the 0.0.4 settings.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from gem_core import registration as _reg
from gem_core.compat.core import CompatEnv, LegacyEnvAdapter
from gem_core.core import Env as _CoreEnv
from gem_core.errors import EnvConstructionError, InvalidArgument, RegistrationError

__all__ = [
    "make",
    "make_vec",
    "register",
    "print_envs",
    "resolve",
    "ENV_REGISTRY",
    "EnvSpec",
    "LEGACY_ALIASES",
    "REFERENCE_ONLY_KWARGS",
    "SINGLE_TURN_FAMILIES",
    "DuplicateEnvError",
    "PLAIN_IDS",
    "PLAIN_ID_CATEGORY",
]

logger = logging.getLogger("gem_core.compat")

ENV_REGISTRY = _reg.registry
EnvSpec = _reg.EnvSpec
"""gem_core's registry (``id -> gem_core.EnvSpec``), under the reference's name."""

REFERENCE_ONLY_KWARGS: frozenset[str] = frozenset(
    {
        "seed",  # becomes the first reset's seed
        "use_mp",
        "dataset",
        "verbose",
        "load_from_cache_file",
        "max_workers",
        "sandbox_type",
        "extract_boxed",
        "num_workers",
        # ROLL's VL env manager injects these into every env's kwargs
        "current_env_id",
        "reward_tokenizer",
        "reward_proxy",
        "reward_generating_args",
    }
)
"""Constructor kwargs the reference envs accept and gem_core envs do not need.

``make`` drops them (``seed`` seeds the first reset) when the gem_core constructor does
not take them; a gem_core constructor that does take one (e.g. ``rg:*`` ``seed``) gets it."""

SINGLE_TURN_FAMILIES: frozenset[str] = frozenset({"math", "code", "qa", "logic", "eval", "rg"})
"""Id categories whose reference envs swallow ``max_turns`` (they stay single-turn)."""

# gem-llm 0.0.4's plain ids -> (gem_core id of the same game, the 0.0.4 constructor kwargs).
LEGACY_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "game:GuessTheNumber-v0": ("game:GuessTheNumber-v0-easy", {"min_number": 1, "max_number": 20, "max_turns": 10}),
    "game:GuessTheNumber-v0-hard-no-max-turn": (
        "game:GuessTheNumber-v0-hard", {"min_number": 1, "max_number": 50, "max_turns": 50}),
    "game:Mastermind-v0": (
        "game:Mastermind-v0-easy",
        {"code_length": 4, "num_numbers": 6, "max_turns": 20, "duplicate_numbers": False}),
    "game:Minesweeper-v0": ("game:Minesweeper-v0-easy", {"rows": 8, "cols": 8, "num_mines": 10, "max_turns": 100}),
    "game:Minesweeper-v0-very-easy": (
        "game:Minesweeper-v0-easy", {"rows": 3, "cols": 3, "num_mines": 1, "max_turns": 10}),
    "game:Wordle-v0": ("game:Wordle-v0-easy", {"word_length": 5, "only_real_words": True, "max_turns": 15}),
    "game:FifteenPuzzle-v0": ("game:FifteenPuzzle-v0-easy", {"num_rows": 3, "max_turns": 20}),
    "game:Hangman-v0": ("game:Hangman-v0-easy", {"word_length": 5, "hardcore": False, "max_turns": 15}),
    "game:Sudoku-v0": ("game:Sudoku-v0-hard", {"clues": 50, "max_turns": 50, "scale": 9}),
    # 0.0.4's ``invalid_action_reward_type='v2'`` has no gem_core counterpart (dropped).
    "game:Sudoku-v0-easy-v2": ("game:Sudoku-v0-easy", {"clues": 10, "max_turns": 15, "scale": 4}),
    "game:TowerofHanoi-v0": ("game:TowerofHanoi-v0-easy", {"num_disks": 4, "max_turns": 20}),
}
"""The plain ``game:*-v0`` ids of gem-llm 0.0.4 (dropped in 0.1.0), as gem_core games."""


class DuplicateEnvError(RegistrationError, ValueError):
    """`register` of an id that is already registered (a ``ValueError``, as in the reference)."""


PLAIN_ID_CATEGORY = "custom"
"""The category `register` files an id without one under (``"sokoban"`` -> ``"custom:sokoban"``)."""

PLAIN_IDS: dict[str, str] = {}
"""Ids registered through `register` without a category -> the gem_core id they are filed under."""


def resolve(env_id: str) -> tuple[_reg.EnvSpec, dict[str, Any]]:
    """The gem_core `EnvSpec` of ``env_id`` (a 0.0.4 alias or a plain id `register` filed
    under a category included) and the alias's kwargs.

    Raises:
        NameNotFound / VersionNotFound: an id neither registry knows (with close matches).
    """
    if isinstance(env_id, str) and env_id in PLAIN_IDS and not dict.__contains__(_reg.registry, env_id):
        return _reg.spec(PLAIN_IDS[env_id]), {}
    if isinstance(env_id, str) and env_id in LEGACY_ALIASES and not dict.__contains__(_reg.registry, env_id):
        target, kwargs = LEGACY_ALIASES[env_id]
        return _reg.spec(target), dict(kwargs)
    return _reg.spec(env_id), {}


def _accepted(factory: Callable[..., Any]) -> set[str] | None:
    """Keyword names ``factory`` takes, or None when it takes ``**kwargs`` / cannot be inspected."""
    import inspect

    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _factory(env_spec: _reg.EnvSpec) -> Callable[..., Any] | None:
    if callable(env_spec.entry_point):
        return env_spec.entry_point
    try:
        return _reg.load_entry_point(env_spec.entry_point)
    except Exception:  # noqa: BLE001 - gem_core.make reports import problems itself
        return None


def make(env_id: str, *, terminate_on_truncation: bool = True, **kwargs: Any) -> CompatEnv:
    """Build a gem_core env the way the reference's ``gem.make(env_id, **kwargs)`` does.

    Args:
        env_id: a gem_core id or a gem-llm 0.0.4 alias (`LEGACY_ALIASES`).
        terminate_on_truncation: report ``terminated=True`` on truncated steps too: the
            reference convention (the default), for loops that test only ``terminated``.
            ``False`` gives gymnasium's (``terminated=False, truncated=True`` at the
            turn limit).
        **kwargs: constructor kwargs. ``seed`` seeds the first reset (unless the gem_core
            constructor takes ``seed`` itself); the other `REFERENCE_ONLY_KWARGS` are
            dropped when the constructor does not take them; ``max_turns`` is dropped for
            `SINGLE_TURN_FAMILIES` and is the turn limit otherwise.

    Returns:
        A `CompatEnv` (reference conventions, see there) around ``gem_core.make``'s stack.

    Raises:
        NameNotFound / VersionNotFound: unknown id, with gem_core's close matches.
        InvalidKwarg: a kwarg the env does not take and the reference would not swallow
            either (the message names the env id and the kwarg).
        EnvConstructionError: the constructor raised.
    """
    env_spec, alias_kwargs = resolve(env_id)
    call_kwargs = {**alias_kwargs, **kwargs}
    factory = _factory(env_spec)
    accepted = _accepted(factory) if factory is not None else None
    seed, dropped = split_reference_kwargs(env_id, call_kwargs, accepted)
    if "max_turns" in call_kwargs and env_spec.category in SINGLE_TURN_FAMILIES:
        call_kwargs.pop("max_turns")
        dropped.append("max_turns")
    if dropped:
        logger.debug("gem_core.compat.make(%r): dropped reference-only kwargs %s", env_id, dropped)
    max_turns = call_kwargs.pop("max_turns", None)
    env = _reg.make(env_spec, max_turns=max_turns, **call_kwargs)
    return CompatEnv(
        env,
        env_id=env_id,
        seed=seed,
        terminate_on_truncation=terminate_on_truncation,
        make_kwargs=kwargs,
    )


def split_reference_kwargs(env_id: str, kwargs: dict[str, Any], accepted: set[str] | None) -> tuple[int | None, list[str]]:
    """Take the `REFERENCE_ONLY_KWARGS` the gem_core constructor does not take (``accepted``;
    ``None``: unknown) out of ``kwargs``, in place: ``(first reset's seed, names dropped)``."""
    seed = None
    dropped: list[str] = []
    for name in sorted(set(kwargs) & REFERENCE_ONLY_KWARGS):
        if accepted is not None and name in accepted:
            continue  # the gem_core env takes it (rg:* takes seed, code:* max_workers ...)
        value = kwargs.pop(name)
        if name == "seed":
            seed = _first_seed(env_id, value)
        else:
            dropped.append(name)
    return seed, dropped


def _first_seed(env_id: str, value: Any) -> int | None:
    import numbers

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgument(f"make({env_id!r}, seed=...) expects an int or None, got {value!r}")
    # Reference scripts pass time.time_ns(); gem_core seeds are non-negative ints.
    return int(value) % 2**63


def _build_reference_style(entry_point: str | Callable[..., Any], **kwargs: Any) -> _CoreEnv:
    factory = _reg.load_entry_point(entry_point) if isinstance(entry_point, str) else entry_point
    env = factory(**kwargs)
    if env is None:
        raise EnvConstructionError(f"entry point {entry_point!r} returned None, not an env")
    return LegacyEnvAdapter(env) if LegacyEnvAdapter.needed(env) else env


def register(
    env_id: str,
    entry_point: str | Callable[..., Any],
    *,
    plain_id_category: str = PLAIN_ID_CATEGORY,
    **kwargs: Any,
) -> _reg.EnvSpec:
    """Register an env the reference way: extra keywords are constructor kwargs.

    The entry point may be a reference-style class (``reset(self, seed=None)`` without
    ``options``, or not a `gem_core.Env` at all): it is adapted (`LegacyEnvAdapter`).
    Such envs keep their own life cycle (no `OrderEnforcing`: a ``step`` before
    ``reset`` reaches the env, as in the reference).

    An id without a category (``register("sokoban", ...)``, which the reference accepts)
    is filed in gem_core's registry as ``f"{plain_id_category}:{env_id}"``
    (``custom:sokoban``); `make` and `make_vec` take the plain id as well as the filed one
    (`PLAIN_IDS`). Like every registration it lives in the process that made it: import
    the registering module in worker processes too (``gem_core.use_env_modules``).

    Raises:
        DuplicateEnvError: ``env_id`` is already registered (a ``ValueError`` and a
            `RegistrationError`); use ``gem_core.register(..., override=True)`` to replace.
        RegistrationError: a malformed id, category or entry point.
    """
    plain = isinstance(env_id, str) and ":" not in env_id
    if plain:
        if env_id in PLAIN_IDS:
            raise DuplicateEnvError(
                f"env id {env_id!r} is already registered (as {PLAIN_IDS[env_id]!r}); pick another id"
            )
        if not isinstance(plain_id_category, str) or not plain_id_category or ":" in plain_id_category:
            raise RegistrationError(
                f"{env_id}: plain_id_category must be a non-empty name without ':', got {plain_id_category!r}"
            )
        filed = f"{plain_id_category}:{env_id}"
        spec = register(filed, entry_point, **kwargs)
        PLAIN_IDS[env_id] = filed
        return spec
    if dict.__contains__(_reg.registry, env_id):
        raise DuplicateEnvError(
            f"env id {env_id!r} is already registered; pick another id, or replace it with "
            "gem_core.register(id, entry_point, kwargs={...}, override=True)"
        )
    if isinstance(entry_point, str) and ":" not in entry_point:
        raise RegistrationError(f"{env_id}: entry point {entry_point!r} is malformed: expected 'package.module:Attr'")
    if not (isinstance(entry_point, str) or callable(entry_point)):
        raise RegistrationError(
            f"{env_id}: entry_point must be 'module:Attr' or a callable, got {type(entry_point).__name__}"
        )
    return _reg.register(
        env_id,
        functools.partial(_build_reference_style, entry_point),
        kwargs=kwargs,
        order_enforce=False,
        description=f"registered through gem_core.compat ({entry_point if isinstance(entry_point, str) else getattr(entry_point, '__qualname__', entry_point)})",
    )


def print_envs() -> None:
    """Print every registered id (the reference's ``gem.print_envs``)."""
    _reg.pprint_registry()


def make_vec(
    env_ids: str | Sequence[str],
    wrappers: Sequence[Callable[[Any], Any]] | None = None,
    vec_kwargs: Sequence[dict[str, Any]] | None = None,
    async_mode: bool = False,
    seed: int = 0,
    *,
    terminate_on_truncation: bool = True,
    **kwargs: Any,
):
    """Vectorize envs the reference way (one sub-env per entry of ``env_ids``).

    Reference defaults: ``SAME_STEP`` autoreset; sub-env ``i`` is made with
    ``seed=seed + i`` unless ``vec_kwargs[i]`` has a ``seed``; ``kwargs`` go to every
    sub-env's constructor; ``wrappers`` (callables env -> env, e.g. from
    ``get_wrapper_fns``) are applied in order. See `gem_core.compat.vector.VectorEnv`
    for the step and reset conventions (compact partial steps, ``env{i}_kwargs``).

    ``async_mode=True`` steps the sub-envs in gem_core's worker processes (the reference
    used threads); the factories are then sent to the workers, so ``wrappers`` must be
    picklable unless the start method is fork (the default on Linux), and ``.envs`` is
    not available.

    Raises:
        InvalidArgument: ``vec_kwargs`` whose length is not that of ``env_ids``.
        NameNotFound / InvalidKwarg / EnvConstructionError: as `make`.
    """
    from gem_core.compat.vector.vector_env import AsyncVectorEnv, SyncVectorEnv

    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if not ids:
        raise InvalidArgument("make_vec needs at least one env id, got an empty list")
    if vec_kwargs is not None and len(vec_kwargs) != len(ids):
        raise InvalidArgument(
            f"make_vec got {len(vec_kwargs)} vec_kwargs dicts for {len(ids)} env ids; pass one "
            "dict per env id"
        )
    for env_id in ids:
        resolve(env_id)  # an unknown id fails here, once, with close matches
    fns = []
    for i, env_id in enumerate(ids):
        own = dict(vec_kwargs[i]) if vec_kwargs is not None else {}
        own.setdefault("seed", seed + i)
        own.update(kwargs)
        fns.append(
            functools.partial(
                _make_wrapped, env_id, own, tuple(wrappers or ()), terminate_on_truncation
            )
        )
    cls = AsyncVectorEnv if async_mode else SyncVectorEnv
    return cls(ids, fns)


def _make_wrapped(
    env_id: str, kwargs: dict[str, Any], wrappers: tuple[Callable[[Any], Any], ...],
    terminate_on_truncation: bool,
) -> _CoreEnv:
    env: Any = make(env_id, terminate_on_truncation=terminate_on_truncation, **kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env
