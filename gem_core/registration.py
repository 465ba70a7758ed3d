"""The env registry: `EnvSpec`, `register`, `make`, `spec`, `pprint_registry` and plugins."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib
import inspect
import re
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gem_core.core import Env
from gem_core.errors import (
    EnvConstructionError,
    Error,
    InvalidKwarg,
    NameNotFound,
    RegistrationError,
    VersionNotFound,
    check_positive_int,
)

__all__ = [
    "EnvSpec",
    "WrapperSpec",
    "register",
    "make",
    "spec",
    "registry",
    "pprint_registry",
    "parse_env_id",
    "load_entry_point",
    "PLUGIN_GROUP",
    "MAX_ENV_ID_CHARS",
]

PLUGIN_GROUP = "gem_core.envs"

# `category:Name-vN[-variant]`; the category, version and variant are optional
# (`rg:letter_counting`, `logic:RuleTaker-d0`, `game:GuessTheNumber-v0-easy`).
MAX_ENV_ID_CHARS = 200

# Name and variant are '-'-separated non-empty segments (no leading, trailing or double '-').
ENV_ID_RE = re.compile(
    r"^(?:(?P<category>[A-Za-z0-9_.]+):)?"
    r"(?P<name>[A-Za-z0-9_][A-Za-z0-9_.+]*(?:-[A-Za-z0-9_.+]+)*?)"
    r"(?:-v(?P<version>\d+)(?:-(?P<variant>[A-Za-z0-9_.+]+(?:-[A-Za-z0-9_.+]+)*))?)?$"
)


def parse_env_id(env_id: str) -> tuple[str | None, str, int | None, str | None]:
    """Split an id into ``(category, name, version, variant)``.

    >>> parse_env_id("game:GuessTheNumber-v0-easy")
    ('game', 'GuessTheNumber', 0, 'easy')
    """
    if not isinstance(env_id, str):
        raise RegistrationError(f"env id must be a str, got {type(env_id).__name__}")
    if len(env_id) > MAX_ENV_ID_CHARS:
        raise RegistrationError(
            f"env id {env_id[:40]!r}... is {len(env_id)} characters long; ids have at most "
            f"{MAX_ENV_ID_CHARS} ('category:Name-vN[-variant]')"
        )
    m = ENV_ID_RE.fullmatch(env_id)
    if m is None:
        raise RegistrationError(
            f"malformed env id {env_id!r}: expected 'category:Name-vN[-variant]', "
            "e.g. 'game:GuessTheNumber-v0-easy' (letters, digits, '_', '.', '-', '+')"
        )
    version = m["version"]
    return m["category"], m["name"], int(version) if version is not None else None, m["variant"]


def load_entry_point(entry_point: str) -> Any:
    """Import ``"package.module:Attr"`` and return the attribute."""
    module_name, sep, attr = entry_point.partition(":")
    if not sep or not module_name or not attr:
        raise RegistrationError(
            f"entry point {entry_point!r} is malformed: expected 'package.module:Attr'"
        )
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RegistrationError(
                f"entry point {entry_point!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    return obj


@dataclass(frozen=True)
class WrapperSpec:
    """A wrapper that `make` applies after the standard stack.

    Attributes:
        entry_point: ``"module:Class"`` or a callable ``(env, **kwargs) -> Env``.
        kwargs: keyword arguments for it.
    """

    entry_point: str | Callable[..., Env]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def apply(self, env: Env) -> Env:
        factory = (
            load_entry_point(self.entry_point)
            if isinstance(self.entry_point, str)
            else self.entry_point
        )
        return factory(env, **self.kwargs)


@dataclass
class EnvSpec:
    """Everything `make` needs to build an env.

    Attributes:
        id: ``category:Name-vN[-variant]``.
        entry_point: ``"module:Class"`` (imported only inside `make`) or a callable.
        kwargs: default constructor arguments.
        max_turns: turn limit applied by `TimeLimit` (``None``: no limit).
        wrappers: extra wrappers applied outermost, in order.
        description: one line shown by `pprint_registry` and ``gem list``.
        order_enforce: wrap in `OrderEnforcing` (``step`` before ``reset`` raises).
        disable_env_checker: skip the passive checker.
        offline: whether the env works without network access.
    """

    id: str
    entry_point: str | Callable[..., Env]
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_turns: int | None = None
    wrappers: tuple[WrapperSpec, ...] = ()
    description: str = ""
    order_enforce: bool = True
    disable_env_checker: bool = False
    offline: bool = True

    category: str | None = field(init=False)
    name: str = field(init=False)
    version: int | None = field(init=False)
    variant: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.category, self.name, self.version, self.variant = parse_env_id(self.id)
        if not (callable(self.entry_point) or isinstance(self.entry_point, str)):
            raise RegistrationError(
                f"{self.id}: entry_point must be 'module:Attr' or a callable, "
                f"got {type(self.entry_point).__name__}"
            )
        if isinstance(self.entry_point, str) and ":" not in self.entry_point:
            raise RegistrationError(
                f"{self.id}: entry point {self.entry_point!r} is malformed: "
                "expected 'package.module:Attr'"
            )
        check_positive_int(f"{self.id}: max_turns", self.max_turns, allow_none=True, error=RegistrationError)
        self.wrappers = tuple(
            w if isinstance(w, WrapperSpec) else WrapperSpec(*w) if isinstance(w, tuple) else WrapperSpec(w)
            for w in self.wrappers
        )

    @property
    def family(self) -> str | None:
        """The id's category (``game``, ``math``, ...)."""
        return self.category

    def make(self, **kwargs: Any) -> Env:
        return make(self, **kwargs)

    def replace(self, **changes: Any) -> EnvSpec:
        return dataclasses.replace(self, **changes)


class EnvRegistry(dict):
    """``id -> EnvSpec``; third-party plugins are loaded on first lookup."""

    _plugins_loaded = False
    _plugins_loading = False
    # Held while the plugins load: a lookup from another thread (envs made concurrently in
    # an executor, as the adapters' rollouts do) waits for them instead of missing their ids;
    # re-entrant, so a plugin that looks ids up while it registers does not wait on itself.
    _plugins_lock = threading.RLock()

    def _ensure_plugins(self) -> None:
        if EnvRegistry._plugins_loaded:
            return
        with EnvRegistry._plugins_lock:
            if EnvRegistry._plugins_loaded or EnvRegistry._plugins_loading:
                return
            EnvRegistry._plugins_loading = True
            try:
                load_plugins()
            finally:
                EnvRegistry._plugins_loaded = True
                EnvRegistry._plugins_loading = False

    def __getitem__(self, key: str) -> EnvSpec:
        self._ensure_plugins()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._ensure_plugins()
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._ensure_plugins()
        return super().__iter__()

    def __len__(self) -> int:
        self._ensure_plugins()
        return super().__len__()

    def get(self, key: str, default: Any = None) -> Any:
        self._ensure_plugins()
        return super().get(key, default)

    def keys(self):  # type: ignore[override]
        self._ensure_plugins()
        return super().keys()

    def values(self):  # type: ignore[override]
        self._ensure_plugins()
        return super().values()

    def items(self):  # type: ignore[override]
        self._ensure_plugins()
        return super().items()


registry: EnvRegistry = EnvRegistry()


def register(
    id: str,
    entry_point: str | Callable[..., Env],
    *,
    kwargs: dict[str, Any] | None = None,
    max_turns: int | None = None,
    pass_max_turns: bool = False,
    wrappers: Sequence[WrapperSpec | str | Callable[..., Env]] = (),
    description: str = "",
    order_enforce: bool = True,
    disable_env_checker: bool = False,
    offline: bool = True,
    override: bool = False,
) -> EnvSpec:
    """Register an env id.

    Args:
        id: ``category:Name-vN[-variant]`` (the version part may be left out, as in
            ``rg:letter_counting``): a category is required, the name and variant are
            letters, digits, ``_ . +`` in ``-``-separated segments, and the version is a
            number without leading zeros (``v01`` and ``v1`` would be the same version).
            Anything else raises `RegistrationError`.
        entry_point: ``"package.module:Class"`` (imported lazily by `make`) or a callable.
        kwargs: default constructor arguments.
        max_turns: turn limit (``truncated=True`` when reached).
        pass_max_turns: the env owns its turn budget (it states it in its instructions):
            ``max_turns`` is also its constructor's ``max_turns`` argument, and
            ``make(id, max_turns=N)`` passes ``N`` to both. The one way to say so: ``kwargs``
            must then leave ``max_turns`` out.
        wrappers: extra wrappers applied outermost.
        description: one line for listings.
        order_enforce: raise `ResetNeeded` on ``step`` before ``reset``.
        disable_env_checker: skip the passive checker.
        offline: whether the env works without network access.
        override: replace an existing registration instead of raising.

    Returns:
        The new `EnvSpec`.
    """
    _check_registered_id(id)
    kwargs = dict(kwargs or {})
    if pass_max_turns:
        if "max_turns" in kwargs:
            raise RegistrationError(
                f"{id}: pass_max_turns=True takes the constructor's max_turns from register's "
                f"max_turns, but kwargs also set it to {kwargs['max_turns']!r}; remove it from kwargs")
        kwargs["max_turns"] = max_turns
    env_spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=kwargs,
        max_turns=max_turns,
        wrappers=tuple(wrappers),  # type: ignore[arg-type]
        description=description,
        order_enforce=order_enforce,
        disable_env_checker=disable_env_checker,
        offline=offline,
    )
    if not override and dict.__contains__(registry, id):
        raise RegistrationError(
            f"env id {id!r} is already registered; pass override=True to replace it"
        )
    dict.__setitem__(registry, id, env_spec)
    return env_spec


def _check_registered_id(env_id: Any) -> None:
    """What `register` adds to `parse_env_id`: a category, and a canonical version number."""
    category, name, version, variant = parse_env_id(env_id)
    if category is None:
        raise RegistrationError(
            f"env id {env_id!r} has no category: register ids as 'category:Name-vN[-variant]', "
            f"e.g. 'mypkg:{name}-v0' (the category groups ids in `gem list` and names the family)"
        )
    written = ENV_ID_RE.fullmatch(env_id)["version"]  # parse_env_id matched it
    if written is not None and written != str(version):
        raise RegistrationError(
            f"env id {env_id!r}: the version must be written without leading zeros "
            f"(-v{version}), so that one version has one id"
        )


def load_plugins() -> None:
    """Import every ``gem_core.envs`` entry point, then the modules ``GEM_ENV_MODULES``
    names (`gem_core.env_modules`); a broken one is skipped with a warning."""
    from gem_core.env_modules import import_from_environ

    try:
        _load_entry_points()
    finally:
        import_from_environ()


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    try:
        eps = entry_points(group=PLUGIN_GROUP)
    except Exception as e:  # pragma: no cover - broken metadata on the machine
        warnings.warn(f"gem_core: could not list {PLUGIN_GROUP!r} plugins: {e}", stacklevel=2)
        return
    for ep in eps:
        try:
            fn = ep.load()
            if callable(fn):
                fn()
        except Exception as e:
            dist = getattr(getattr(ep, "dist", None), "name", None) or "unknown distribution"
            warnings.warn(
                f"gem_core: skipped env plugin {ep.name!r} ({ep.value}) from {dist}: "
                f"{type(e).__name__}: {e}",
                RuntimeWarning,
                stacklevel=2,
            )


def _not_found(env_id: str) -> Error:
    ids = list(dict.keys(registry)) if EnvRegistry._plugins_loaded else list(registry.keys())
    try:
        category, name, version, variant = parse_env_id(env_id)
    except RegistrationError as e:
        return NameNotFound(str(e))
    same_name = [
        s for s in dict.values(registry) if s.category == category and s.name == name
    ]
    if same_name and version is not None:
        versions = sorted({s.version for s in same_name if s.version is not None})
        if version in versions:  # the version exists; the variant does not
            variants = sorted(s.id for s in same_name if s.version == version)
            what = f"no variant {variant!r}" if variant else "no plain (variant-less) registration"
            return NameNotFound(
                f"env {env_id!r} is not registered: {category + ':' if category else ''}"
                f"{name}-v{version} has {what}. Registered: {', '.join(variants[:8])}."
            )
        same_variant = [s.id for s in same_name if s.variant == variant]
        hint = f" Registered: {', '.join(sorted(same_variant or [s.id for s in same_name])[:8])}."
        return VersionNotFound(
            f"env {env_id!r} has no version {version}; available versions of "
            f"{category + ':' if category else ''}{name}: {versions}.{hint}"
        )
    matches = difflib.get_close_matches(env_id, ids, n=5, cutoff=0.6)
    if not matches:
        lowered = env_id.lower()
        matches = [i for i in ids if lowered in i.lower()][:5]
    hint = f" Did you mean: {', '.join(matches)}?" if matches else ""
    from gem_core.env_modules import not_found_hint

    return NameNotFound(
        f"no env registered with id {env_id!r}.{hint} "
        f"Run `gem list` or gem_core.pprint_registry() to see every id. {not_found_hint()}"
    )


def spec(env_id: str) -> EnvSpec:
    """Return the `EnvSpec` of ``env_id`` (raises `NameNotFound` / `VersionNotFound`)."""
    if not isinstance(env_id, str):
        raise NameNotFound(f"env id must be a str, got {type(env_id).__name__}: {env_id!r}")
    found = registry.get(env_id)
    if found is None:
        raise _not_found(env_id)
    return found


# make()'s own keyword arguments: offered as "did you mean" for a constructor kwarg too.
_MAKE_KWARGS = ("max_turns", "disable_env_checker", "wrappers")


def _accepted_kwargs(factory: Callable[..., Any]) -> set[str]:
    """The keyword arguments ``factory`` names, following ``**kwargs`` up a class's
    ``__init__`` chain (for suggestions only: a chain may forward anything)."""
    targets: list[Any] = [factory]
    if inspect.isclass(factory):
        targets = [k.__init__ for k in factory.__mro__ if "__init__" in vars(k) and k is not object]
    names: set[str] = set()
    for target in targets:
        try:
            params = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):
            break
        names |= {
            p.name
            for p in params
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        }
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            break
    names.discard("self")
    return names


def _unknown_kwargs(env_id: str, unknown: Sequence[str], accepted: set[str]) -> InvalidKwarg:
    candidates = sorted(accepted | set(_MAKE_KWARGS))
    close = {k: difflib.get_close_matches(k, candidates, n=1) for k in unknown}
    hints = "; ".join(f"did you mean {v[0]!r} for {k!r}?" for k, v in close.items() if v)
    return InvalidKwarg(
        f"env {env_id!r} got unknown keyword argument(s) {', '.join(map(repr, unknown))}. "
        f"It accepts: {', '.join(sorted(accepted)) or '(none)'} (and make()'s "
        f"{', '.join(_MAKE_KWARGS)})." + (f" {hints}" if hints else "")
    )


def _check_kwargs(env_id: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    params = sig.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return  # a refused one is caught when the constructor raises (`_refused_kwarg`)
    accepted = {
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise _unknown_kwargs(env_id, unknown, accepted)


def _refused_kwarg(env_id: str, factory: Any, kwargs: dict[str, Any], exc: TypeError) -> InvalidKwarg | None:
    """An `InvalidKwarg` (with "did you mean") when ``exc`` is a constructor up the
    ``**kwargs`` chain refusing one of ``kwargs``; else ``None``."""
    text = str(exc)
    marker = "unexpected keyword argument '"
    at = text.find(marker)
    if at < 0:
        return None
    start = at + len(marker)
    end = text.find("'", start)
    name = text[start:end] if end > start else ""
    if name not in kwargs:
        return None
    return _unknown_kwargs(env_id, [name], _accepted_kwargs(factory) - {name})


def make(
    id: str | EnvSpec,
    *,
    max_turns: int | None = None,
    disable_env_checker: bool | None = None,
    wrappers: Sequence[WrapperSpec | Callable[..., Env]] | None = None,
    **kwargs: Any,
) -> Env:
    """Build a registered env.

    The stack, innermost first: the env → passive checker → `OrderEnforcing` →
    `TimeLimit` (when the spec or the call sets ``max_turns``) → the spec's extra
    wrappers → ``wrappers`` given here.

    Args:
        id: a registered id or an `EnvSpec`.
        max_turns: override the spec's turn limit (also passed to the constructor when
            the spec's kwargs hold ``max_turns``, i.e. the env owns its turn budget).
        disable_env_checker: override the spec's passive-checker setting.
        wrappers: more wrappers to apply outermost.
        **kwargs: constructor arguments (override the spec's defaults).

    Raises:
        NameNotFound / VersionNotFound: unknown id (with close matches).
        InvalidKwarg: a kwarg the constructor does not accept.
        EnvConstructionError: the constructor raised (names the id and kwargs).
    """
    env_spec = id if isinstance(id, EnvSpec) else spec(id)
    all_kwargs = {**copy.deepcopy(env_spec.kwargs), **kwargs}

    if isinstance(env_spec.entry_point, str):
        try:
            factory = load_entry_point(env_spec.entry_point)
        except ImportError as e:  # DependencyNotInstalled passes through unchanged
            if isinstance(e, Error):
                raise
            raise EnvConstructionError(
                f"could not import {env_spec.entry_point!r} for env {env_spec.id!r}: {e}"
            ) from e
    else:
        factory = env_spec.entry_point
    if max_turns is not None and "max_turns" in env_spec.kwargs:
        # An env that owns its turn budget (it appears in its instructions) gets the
        # override too, so the text and the TimeLimit agree.
        all_kwargs["max_turns"] = max_turns
    _check_kwargs(env_spec.id, factory, all_kwargs)

    try:
        env = factory(**all_kwargs)
    except Error as e:
        if hasattr(e, "add_note"):
            e.add_note(f"(while making env {env_spec.id!r} with kwargs {all_kwargs!r})")
        raise
    except Exception as e:
        refused = _refused_kwarg(env_spec.id, factory, all_kwargs, e) if isinstance(e, TypeError) else None
        if refused is not None:
            raise refused from e
        raise EnvConstructionError(
            f"constructing env {env_spec.id!r} with kwargs {all_kwargs!r} failed: "
            f"{type(e).__name__}: {e}"
        ) from e
    if not isinstance(env, Env):
        raise EnvConstructionError(
            f"entry point of {env_spec.id!r} returned {type(env).__name__}, not a gem_core.Env"
        )

    made_spec = env_spec.replace(kwargs=all_kwargs)
    if max_turns is not None:
        made_spec = made_spec.replace(max_turns=max_turns)
    env.unwrapped.spec = made_spec

    from gem_core.wrappers.common import OrderEnforcing, PassiveEnvChecker, TimeLimit

    check = not (env_spec.disable_env_checker if disable_env_checker is None else disable_env_checker)
    if check:
        env = PassiveEnvChecker(env)
    if env_spec.order_enforce:
        env = OrderEnforcing(env)
    if made_spec.max_turns is not None:
        env = TimeLimit(env, max_turns=made_spec.max_turns)
    for w in env_spec.wrappers:
        env = w.apply(env)
    for w in wrappers or ():
        env = w.apply(env) if isinstance(w, WrapperSpec) else w(env)
    return env


def pprint_registry(*, pattern: str | None = None, print_output: bool = True) -> str | None:
    """Print (or return) the registered ids grouped by category, optionally filtered."""
    groups: dict[str, list[EnvSpec]] = {}
    for env_spec in registry.values():
        if pattern and pattern.lower() not in env_spec.id.lower():
            continue
        groups.setdefault(env_spec.category or "(none)", []).append(env_spec)
    lines: list[str] = []
    for category in sorted(groups):
        lines.append(f"===== {category} =====")
        for s in sorted(groups[category], key=lambda s: s.id):
            lines.append(f"{s.id:<44} {s.description}".rstrip())
        lines.append("")
    text = "\n".join(lines).rstrip() + "\n" if lines else "(no env matches)\n"
    if print_output:
        print(text, end="")
        return None
    return text

