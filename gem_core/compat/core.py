"""Reference-GEM base classes on gem_core: `Env`, `EnvWrapper`, `CompatEnv` and `LegacyEnvAdapter`.

Mirrors ``gem.core``. The reference conventions these classes add on top of gem_core's
Gymnasium contract:

- ``reset(seed)`` takes the seed positionally, and extra keyword arguments
  (``reset(seed, idx=3)``) become gem_core reset ``options``;
- wrappers expose the attributes of the env they wrap (``env.max_turns``,
  ``env.dataset``, ``env.get_task_suffix()`` ...), looked up on read, never copied;
- ``info["suffix"]`` on every reset and step.
"""

from __future__ import annotations

import inspect
import logging
import random
from typing import Any, TypeVar

from gem_core.core import Env as _CoreEnv
from gem_core.core import Wrapper as _CoreWrapper
from gem_core.errors import InvalidKwarg

__all__ = ["ObsType", "ActType", "Env", "EnvWrapper", "ForwardingMixin", "CompatEnv", "LegacyEnvAdapter", "reset_options"]

logger = logging.getLogger("gem_core.compat")

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")

# Reset keywords of the reference envs and their gem_core option names.
_RESET_KEYWORDS = {"idx": "index"}


def reset_options(options: dict[str, Any] | None, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """gem_core reset ``options`` from a reference-style ``reset(seed, **kwargs)`` call.

    ``idx`` (the reference dataset envs' row index) becomes ``index``; other keywords
    pass through under their own names. Returns ``None`` when there is nothing to pass.
    """
    merged = dict(options or {})
    for key, value in kwargs.items():
        merged[_RESET_KEYWORDS.get(key, key)] = value
    return merged or None


class Env(_CoreEnv):
    """Base class for envs written against the reference ``gem.Env``.

    A `gem_core.Env` whose ``reset`` also takes the seed positionally, so reference-style
    subclasses port unchanged::

        class ReverseStringEnv(gem_core.compat.Env):
            def reset(self, seed=None):
                super().reset(seed)
                ...

    As in the reference, ``reset(seed)`` also seeds the global ``random`` and ``numpy``
    generators (reference envs draw from them); set the class attribute
    ``seed_global_rng = False`` to seed only the env's own ``self.rng`` / ``self.np_random``.
    An env whose ``reset`` has no ``options`` parameter is wrapped in a
    `LegacyEnvAdapter` by `gem_core.compat.register`.
    """

    seed_global_rng: bool = True

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any):  # type: ignore[override]
        if seed is not None:
            self._seed(seed)
            if self.seed_global_rng:
                random.seed(seed)
                import numpy as np

                np.random.seed(seed % 2**32)
        return None, {}

    def spawn(self, same_state: bool = False, **kwargs: Any) -> _CoreEnv:
        """Not provided by the base class (as in the reference); gem_core reproduces an
        episode by building the env again and resetting it with the same seed."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement spawn(); build a new env with the same "
            "id and kwargs and reset it with the same seed"
        )


class ForwardingMixin:
    """Attribute reads that no layer of a wrapper answers fall through to the wrapped env.

    Put it first in the bases of a `gem_core.Wrapper` subclass. Reading an attribute no
    layer has raises ``AttributeError`` naming the wrapper. Setting an attribute sets it
    on the wrapper only (as the reference's copies did).
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        try:
            env = object.__getattribute__(self, "env")
        except AttributeError:
            raise AttributeError(name) from None
        try:
            return env.get_wrapper_attr(name)
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r}, and no env it wraps has one"
            ) from None


class EnvWrapper(ForwardingMixin, _CoreWrapper):
    """A wrapper with the reference conventions (``gem.core.EnvWrapper``): positional
    ``reset(seed, **kwargs)`` (keywords become reset options) and attribute reads
    forwarded to the wrapped env (`ForwardingMixin`)."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any):  # type: ignore[override]
        return self.env.reset(seed=seed, options=reset_options(options, kwargs))


def _accepts(func: Any, name: str) -> bool:
    """Whether ``func`` takes a keyword ``name`` (or ``**kwargs``)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.kind is p.VAR_KEYWORD
        for p in params
    )


class LegacyEnvAdapter(_CoreEnv):
    """A reference-style env (``reset(self, seed=None)``, any base class) as a `gem_core.Env`.

    gem_core's wrappers call ``reset(seed=..., options=...)``; this adapter calls the
    inner env's ``reset(seed)`` and passes ``options`` as keyword arguments only when
    there are some (a reset without ``**kwargs`` that gets options raises ``TypeError``
    naming them). ``step``, ``close`` and ``sample_random_action`` go to the inner env;
    attribute reads fall through to it.

    Attributes:
        inner: the wrapped reference-style env.
    """

    def __init__(self, inner: Any):
        self.inner = inner

    @staticmethod
    def needed(env: Any) -> bool:
        """Whether ``env`` needs the adapter: not a gem_core.Env, or its reset has no options."""
        return not isinstance(env, _CoreEnv) or not _accepts(env.reset, "options")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if not options:
            return self.inner.reset(seed)
        try:
            return self.inner.reset(seed, **options)
        except TypeError as e:
            raise InvalidKwarg(
                f"{type(self.inner).__name__}.reset() does not take the reset options "
                f"{sorted(options)}: {e}"
            ) from e

    def step(self, action: Any):
        return self.inner.step(action)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def sample_random_action(self) -> Any:
        return self.inner.sample_random_action()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "inner"), name)

    def __str__(self) -> str:
        return f"<LegacyEnvAdapter<{type(self.inner).__name__}>>"

    __repr__ = __str__


class CompatEnv(EnvWrapper):
    """What `gem_core.compat.make` returns: one gem_core env with the reference conventions.

    - ``reset(seed=None, **kwargs)``: positional seed; the ``seed`` given to ``make`` seeds
      the first reset that has none; keywords become reset options (``idx`` → ``index``).
    - ``info["suffix"]`` on every reset and step: the env's ``get_task_suffix()`` when it
      has one, else its one-line ``format_hint()`` (games), else ``""``.
    - ``terminate_on_truncation=True`` (the default): the reference episode-end convention,
      for loops that test only ``terminated``: a truncated step (the turn limit) also
      reports ``terminated=True``. ``False``: gymnasium's (``terminated=False,
      truncated=True`` at the limit).
    - attributes: ``env_id``, ``entry_point`` and ``seed`` (as the reference's ``make``
      sets them), ``dataset`` (the inner env's ``dataset``, else its ``rows``), and every
      attribute of the wrapped layers on read.

    Args:
        env: the env built by `gem_core.make`.
        env_id: the id it was made from.
        seed: the first reset's seed, or None.
        terminate_on_truncation: see above (default True, the reference's).
        make_kwargs: the constructor kwargs, for `spawn`.
    """

    def __init__(
        self,
        env: _CoreEnv,
        *,
        env_id: str,
        seed: int | None = None,
        terminate_on_truncation: bool = True,
        make_kwargs: dict[str, Any] | None = None,
    ):
        super().__init__(env)
        self.env_id = env_id
        spec = env.spec
        self.entry_point = spec.entry_point if spec is not None else None
        self.seed = seed
        self.terminate_on_truncation = bool(terminate_on_truncation)
        self._pending_seed = seed
        self._make_kwargs = dict(make_kwargs or {})

    def get_task_suffix(self) -> str:
        """The per-turn instruction the reference puts in ``info["suffix"]``."""
        for name in ("get_task_suffix", "format_hint"):
            try:
                fn = self.env.get_wrapper_attr(name)
            except AttributeError:
                continue
            if callable(fn):
                try:
                    text = fn()
                except Exception:  # noqa: BLE001 - a suffix must never break a step
                    return ""
                return text if isinstance(text, str) else ""
        return ""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any):  # type: ignore[override]
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        obs, info = self.env.reset(seed=seed, options=reset_options(options, kwargs))
        info = dict(info)
        info.setdefault("suffix", self.get_task_suffix())
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        info.setdefault("suffix", self.get_task_suffix())
        if self.terminate_on_truncation and truncated:
            terminated = True
        return obs, reward, terminated, truncated, info

    @property
    def dataset(self) -> Any:
        """The inner env's ``dataset``, else its ``rows`` (gem_core's loaded rows)."""
        for name in ("dataset", "rows"):
            try:
                return self.env.get_wrapper_attr(name)
            except AttributeError:
                continue
        raise AttributeError(f"{self.env_id!r} has no dataset (neither 'dataset' nor 'rows')")

    def spawn(self, same_state: bool = False, **kwargs: Any) -> CompatEnv:
        """A new env of the same id and kwargs (``kwargs`` override them).

        Raises:
            NotImplementedError: ``same_state=True``: gem_core envs do not copy live state;
                reset the new env with the seed of the episode to replay it.
        """
        if same_state:
            raise NotImplementedError(
                "spawn(same_state=True) is not supported by gem_core envs; spawn a fresh env and "
                "reset it with the same seed to replay an episode"
            )
        return self._fresh(**{**self._make_kwargs, **kwargs})

    def _fresh(self, **kwargs: Any) -> CompatEnv:
        """A new env of this one's id, built from ``kwargs`` (`spawn`'s constructor)."""
        from gem_core.compat.envs.registration import make

        return make(self.env_id, terminate_on_truncation=self.terminate_on_truncation, **kwargs)

    def __str__(self) -> str:
        return f"<CompatEnv{self.env}>"

    __repr__ = __str__
