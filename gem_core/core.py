"""The environment contract: `Env`, `Wrapper` and the one-hook wrappers."""

from __future__ import annotations

import inspect
import random
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, SupportsFloat, TypeVar

from gem_core import seeding
from gem_core.errors import InvalidArgumentType

if TYPE_CHECKING:
    import numpy as np

    from gem_core.registration import EnvSpec

__all__ = [
    "Env",
    "Wrapper",
    "ObservationWrapper",
    "ActionWrapper",
    "RewardWrapper",
    "iter_layers",
    "find_layer",
    "observation_text",
]

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")
WrapperObsType = TypeVar("WrapperObsType")
WrapperActType = TypeVar("WrapperActType")

StepResult = tuple[Any, float, bool, bool, dict[str, Any]]
LayerT = TypeVar("LayerT", bound="Env")

_MISSING = object()


class Env(Generic[ObsType, ActType]):
    """A multi-turn text environment with a Gym-style API.

    A subclass implements `reset` (calling ``super().reset(seed=seed)`` first, which
    seeds ``self.np_random`` and ``self.rng``) and `step`, and may override `close`,
    `sample_random_action` and `state_summary`.

    Contract:
        - ``reset(*, seed=None, options=None) -> (observation, info)``.
        - ``step(action) -> (observation, reward, terminated, truncated, info)``.
          ``terminated``: the task ended (solved, failed, answer graded).
          ``truncated``: a budget outside the task ran out (turn limit, context).
        - Observations are text (the whole view the agent needs this turn).
        - ``info["success"]`` (bool) is set on the final step: did the agent solve the
          task. It is never inferred from the reward.
        - Bad actions never raise from ``step`` on a live episode; they produce a
          documented penalty and observation.
        - No env touches the global ``random`` / ``numpy`` state: use ``self.rng``
          (``random.Random``) or ``self.np_random`` (``numpy.random.Generator``).
        - ``close()`` releases resources and may be called more than once.

    Class attributes:
        metadata: free-form facts about the env (e.g. ``{"category": "game"}``).
        spec: the `EnvSpec` that built this env, set by `gem_core.make`.
        keeps_episode_books: True when the env keeps the books `OrderEnforcing` and
            `TimeLimit` keep, so that they can bind their ``step`` to the env's and cost
            nothing per step: ``done`` is False after ``reset`` and becomes True exactly
            on a step returning ``terminated`` or ``truncated`` (a layer may also set it,
            to end the episode); ``turn`` counts the steps since ``reset`` and is
            ``info["turn"]``; the env truncates when ``turn`` reaches ``max_turns``; and
            ``step`` first calls ``_step_after_end()`` (which raises) when ``done`` and
            that attribute is set. `LanguageGame` keeps them.
    """

    metadata: dict[str, Any] = {}
    spec: EnvSpec | None = None
    keeps_episode_books: ClassVar[bool] = False

    _np_random: np.random.Generator | None = None
    _rng: random.Random | None = None
    _np_random_seed: int | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start a new episode.

        Subclasses call ``super().reset(seed=seed)`` first. With a seed, the env's
        generators are re-seeded, so the same seed gives the same episode; without one,
        they continue (or start from OS entropy on first use).
        """
        if seed is not None:
            self._seed(seed)
        return None, {}  # type: ignore[return-value]

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one agent turn."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def close(self) -> None:
        """Release processes, sockets and temporary files. Safe to call twice."""

    def sample_random_action(self) -> ActType:
        """Return a well-formed random action (for smoke tests and random baselines)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample_random_action()")

    def state_summary(self) -> str | None:
        """A compact text summary of the episode so far, or ``None`` (the default).

        Optional. Long-horizon envs override it so the ``summary`` history format
        (`gem_core.wrappers.HistoryWrapper`) can show the instruction, this summary and
        the latest observation instead of the full history. It must be cheap, must not
        change the episode or consume the env's generators, and should fit in a few
        hundred characters (e.g. ``"Turn 7/20. Known letters: a, e. Board: ..."``).
        """
        return None

    # --- seeding ---------------------------------------------------------------------
    def _seed(self, seed: int) -> None:
        # The numpy generator is built on first use (from ``_np_random_seed``): a reset
        # of an env that never draws from numpy neither imports numpy nor pays for it.
        self._rng = seeding.py_random(seed)
        self._np_random = None
        self._np_random_seed = seeding.check_seed(seed)

    @property
    def np_random(self) -> np.random.Generator:
        """The env's numpy generator (seeded by ``reset(seed=...)``, built on first use)."""
        if self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random(self._np_random_seed)
        return self._np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self._np_random = value
        self._np_random_seed = -1

    @property
    def np_random_seed(self) -> int | None:
        """The seed of ``np_random`` (``-1`` when a generator was assigned directly)."""
        if self._np_random_seed is None:
            self._np_random, self._np_random_seed = seeding.np_random(None)
        return self._np_random_seed

    @property
    def rng(self) -> random.Random:
        """The env's `random.Random` (seeded by ``reset(seed=...)``); cheap for scalars."""
        if self._rng is None:
            self._rng = seeding.py_random(None)
        return self._rng

    @rng.setter
    def rng(self, value: random.Random) -> None:
        self._rng = value

    # --- layers ----------------------------------------------------------------------
    @property
    def unwrapped(self) -> Env:
        """The innermost env (this one, for a bare env)."""
        return self

    def has_wrapper_attr(self, name: str) -> bool:
        """Whether this env (or, for a wrapper, any layer) has attribute ``name``."""
        return hasattr(self, name)

    def get_wrapper_attr(self, name: str) -> Any:
        """Get ``name`` from this env (wrappers search their layers outside-in)."""
        return getattr(self, name)

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        """Set ``name`` on this env. Returns True when set."""
        setattr(self, name, value)
        return True

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __str__(self) -> str:
        if self.spec is None:
            return f"<{type(self).__name__} instance>"
        return f"<{type(self).__name__}<{self.spec.id}>>"

    __repr__ = __str__


class Wrapper(Env[WrapperObsType, WrapperActType], Generic[WrapperObsType, WrapperActType, ObsType, ActType]):
    """Wraps an env to change its behaviour; passes everything through by default.

    Attribute access across layers is explicit: a wrapper does *not* forward unknown
    attributes to the env it wraps (and copies nothing at wrap time). Use
    ``env.get_wrapper_attr(name)`` to find an attribute on any layer, or
    ``env.unwrapped.name`` for the base env.
    """

    def __init__(self, env: Env[ObsType, ActType]):
        if not isinstance(env, Env):
            raise InvalidArgumentType(
                f"{type(self).__name__} expects a gem_core.Env to wrap, got {type(env).__name__}"
            )
        self.env = env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[WrapperObsType, dict[str, Any]]:
        return self.env.reset(seed=seed, options=options)  # type: ignore[return-value]

    def step(self, action: WrapperActType) -> tuple[WrapperObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        return self.env.step(action)  # type: ignore[arg-type,return-value]

    def close(self) -> None:
        self.env.close()

    def sample_random_action(self) -> WrapperActType:
        return self.env.sample_random_action()  # type: ignore[return-value]

    def state_summary(self) -> str | None:
        return self.env.state_summary()

    # Generators, metadata and spec are those of the wrapped env.
    @property
    def np_random(self) -> np.random.Generator:  # type: ignore[override]
        return self.env.np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self.env.np_random = value

    @property
    def np_random_seed(self) -> int | None:  # type: ignore[override]
        return self.env.np_random_seed

    @property
    def rng(self) -> random.Random:  # type: ignore[override]
        return self.env.rng

    @rng.setter
    def rng(self, value: random.Random) -> None:
        self.env.rng = value

    @property
    def metadata(self) -> dict[str, Any]:  # type: ignore[override]
        return self.env.metadata

    @property
    def spec(self) -> EnvSpec | None:  # type: ignore[override]
        return self.env.spec

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def has_wrapper_attr(self, name: str) -> bool:
        return hasattr(self, name) or self.env.has_wrapper_attr(name)

    def get_wrapper_attr(self, name: str) -> Any:
        try:
            return getattr(self, name)
        except AttributeError:
            pass
        try:
            return self.env.get_wrapper_attr(name)
        except AttributeError:
            raise AttributeError(
                f"no layer of {self} has an attribute {name!r}"
            ) from None

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        """Set ``name`` on the outermost layer that has it; else, with ``force``, here.

        A read-only property of a layer (a wrapper's ``spec`` or ``metadata``, which
        mirror the wrapped env) does not count as having it: the search goes on inward.
        Returns True when the attribute was set, False when no layer has it and
        ``force`` is False.
        """
        for layer in iter_layers(self):
            if name in vars(layer):
                setattr(layer, name, value)
                return True
            cls_attr = inspect.getattr_static(type(layer), name, _MISSING)
            if cls_attr is not _MISSING and not (
                isinstance(cls_attr, property) and cls_attr.fset is None
            ):
                setattr(layer, name, value)
                return True
        if force:
            if isinstance(inspect.getattr_static(type(self), name, None), property):
                raise AttributeError(
                    f"{name!r} is read-only on every layer of {self}; nothing was set"
                )
            setattr(self, name, value)
            return True
        return False

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: explain the explicit access rule.
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        raise AttributeError(
            f"{type(self).__name__!s} has no attribute {name!r}; wrappers do not forward "
            f"attributes. Use env.get_wrapper_attr({name!r}) or env.unwrapped.{name}."
        )

    def __str__(self) -> str:
        return f"<{type(self).__name__}{self.env}>"

    __repr__ = __str__


class ObservationWrapper(Wrapper):
    """Changes observations through one hook, `observation`."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self.observation(obs), reward, terminated, truncated, info

    def observation(self, observation: Any) -> Any:
        raise NotImplementedError


class ActionWrapper(Wrapper):
    """Changes actions through one hook, `action`."""

    def step(self, action):
        return self.env.step(self.action(action))

    def action(self, action: Any) -> Any:
        raise NotImplementedError


class RewardWrapper(Wrapper):
    """Changes rewards through one hook, `reward`."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, self.reward(reward), terminated, truncated, info

    def reward(self, reward: SupportsFloat) -> SupportsFloat:
        raise NotImplementedError



def iter_layers(env: Env) -> Iterator[Env]:
    """Every layer of a wrapper stack, outermost first, ending with the bare env.

    The one walk down a stack (``env``, ``env.env``, ... , ``env.unwrapped``): the checks,
    `find_layer` and `Wrapper.set_wrapper_attr` use it.
    """
    layer = env
    while True:
        yield layer
        if not isinstance(layer, Wrapper):
            return
        layer = layer.env


def find_layer(env: Env, cls: type[LayerT]) -> LayerT | None:
    """The outermost layer of ``env``'s stack that is a ``cls`` (``env`` itself counts), or ``None``."""
    for layer in iter_layers(env):
        if isinstance(layer, cls):
            return layer
    return None


def observation_text(obs: Any) -> str:
    """An observation as the text an LLM agent is prompted with; never raises.

    A str unchanged; a multimodal observation — a mapping with a ``"text"`` or ``"images"``
    key, as image envs give ``{"text": ..., "images": [...]}`` — its text (``""`` when that
    is missing or ``None``: image bytes never reach a prompt); ``None`` as ``""``; anything
    else ``str(obs)`` (its ``repr``, cut at 10,000 characters, when ``__str__`` raises).
    The one rule every prompt builder uses: the rollout engine, the history wrappers and
    the trainer adapters.
    """
    if isinstance(obs, str):
        return obs
    if obs is None:
        return ""
    try:
        if isinstance(obs, Mapping) and ("text" in obs or "images" in obs):
            text = obs.get("text")
            return "" if text is None else text if isinstance(text, str) else str(text)
        return str(obs)
    except Exception:
        try:
            text = repr(obs)
        except Exception:
            text = f"<{type(obs).__name__} object with a failing repr>"
        return text if len(text) <= 10_000 else text[:9_997] + "..."
