"""Weighted multi-task mixtures: `Mixture` (ids and weights) and `MixtureEnv` (one sub-env that
redraws its task id every episode).

Multi-task training wants every sub-env of a vector env to draw a fresh task id for
each episode, in proportion to the weights, reproducibly from the seed::

    vec = make_vec({"game:GuessTheNumber-v0-easy": 0.5, "rg:leg_counting": 0.5}, 8, seed=0)
    obs, infos = vec.reset()          # infos[i]["env_id"]: the id sub-env i plays

A fixed split (sub-env ``i`` always plays one id) is a plain list of ids:
``make_vec(["a", "a", "b", "b"])``.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gem_core import seeding
from gem_core.core import Env
from gem_core.errors import ClosedEnvError, InvalidArgument, ResetNeeded
from gem_core.registration import EnvSpec, WrapperSpec, make, spec

__all__ = ["Mixture", "MixtureEnv"]

_SEED_BITS = 63


class Mixture:
    """Registered env ids with sampling weights (a multi-task training mix).

    Weights need not sum to 1 (they are normalized); an id with weight 0 is never
    drawn. Ids are resolved at construction, so an unknown id fails at once with close
    matches.

    Example:
        >>> mix = Mixture({"game:GuessTheNumber-v0-easy": 3, "toy:Echo-v0": 1},
        ...               env_kwargs={"toy:Echo-v0": {"word_length": 3}})
        >>> mix.probabilities
        (0.75, 0.25)
        >>> vec = make_vec(mix, num_envs=8, seed=0)

    Args:
        weights: ``{env_id: weight}`` (a mapping) or a sequence of ``(env_id, weight)``
            pairs; ids may also be `EnvSpec` objects. Weights are finite numbers >= 0,
            not all 0.
        env_kwargs: constructor kwargs per id, ``{env_id: {...}}`` (``max_turns``
            overrides that id's turn limit, as in `gem_core.make`).

    Attributes:
        specs: the resolved specs, in the given order.
        weights: the weights as given (floats).
        probabilities: the weights normalized to sum to 1.
        env_kwargs: ``{env_id: kwargs}`` for the ids that have any.

    Raises:
        InvalidArgument: an empty mix, a weight that is not a finite number >= 0, all
            weights 0, an id given twice, or ``env_kwargs`` for an id not in the mix.
        NameNotFound / VersionNotFound: an unknown id (with close matches).
    """

    def __init__(
        self,
        weights: Mapping[str | EnvSpec, float] | Sequence[tuple[str | EnvSpec, float]],
        *,
        env_kwargs: Mapping[str, dict[str, Any]] | None = None,
    ):
        if isinstance(weights, Mapping):
            pairs = list(weights.items())
        elif isinstance(weights, Sequence) and not isinstance(weights, (str, bytes)):
            pairs = list(weights)
            for k, pair in enumerate(pairs):
                if not (isinstance(pair, tuple) and len(pair) == 2):
                    raise InvalidArgument(
                        f"Mixture weights[{k}] is {pair!r}; expected an (env_id, weight) pair, or pass "
                        "a dict {env_id: weight}"
                    )
        else:
            raise InvalidArgument(
                f"Mixture expects a dict {{env_id: weight}} or a list of (env_id, weight) pairs, "
                f"got {type(weights).__name__}"
            )
        if not pairs:
            raise InvalidArgument(
                "Mixture got no env ids; pass at least one, e.g. {'game:GuessTheNumber-v0-easy': 1.0}"
            )
        specs: list[EnvSpec] = []
        values: list[float] = []
        for key, weight in pairs:
            env_spec = key if isinstance(key, EnvSpec) else spec(key)
            if any(s.id == env_spec.id for s in specs):
                raise InvalidArgument(
                    f"Mixture got env id {env_spec.id!r} twice; give each id once"
                )
            if (
                isinstance(weight, bool)
                or not isinstance(weight, (int, float))
                or not math.isfinite(weight)
            ):
                raise InvalidArgument(
                    f"Mixture weight of {env_spec.id!r} is {weight!r}; expected a finite number >= 0"
                )
            if weight < 0:
                raise InvalidArgument(
                    f"Mixture weight of {env_spec.id!r} is {weight!r}; weights must be >= 0 "
                    "(use 0 to leave an id out)"
                )
            specs.append(env_spec)
            values.append(float(weight))
        total = math.fsum(values)
        if total <= 0:
            raise InvalidArgument(
                f"Mixture weights are all 0 ({', '.join(s.id for s in specs)}); give at least one "
                "id a positive weight"
            )
        self.specs: tuple[EnvSpec, ...] = tuple(specs)
        self.weights: tuple[float, ...] = tuple(values)
        self.probabilities: tuple[float, ...] = tuple(v / total for v in values)
        cumulative: list[float] = []
        running = 0.0
        for v in values:
            running += v
            cumulative.append(running)
        self._cumulative = cumulative
        self._total = running
        self._last_positive = max(i for i, v in enumerate(values) if v > 0)

        ids = [s.id for s in specs]
        kw: dict[str, dict[str, Any]] = {}
        if env_kwargs is not None:
            if not isinstance(env_kwargs, Mapping):
                raise InvalidArgument(
                    f"Mixture env_kwargs must be a dict {{env_id: {{...}}}}, got {type(env_kwargs).__name__}"
                )
            for key, value in env_kwargs.items():
                if key not in ids:
                    raise InvalidArgument(
                        f"Mixture env_kwargs names {key!r}, which is not in the mix ({', '.join(ids)})"
                    )
                if not isinstance(value, dict):
                    raise InvalidArgument(
                        f"Mixture env_kwargs[{key!r}] must be a dict of constructor kwargs, got "
                        f"{type(value).__name__}"
                    )
                kw[key] = dict(value)
        self.env_kwargs: dict[str, dict[str, Any]] = kw

    @property
    def ids(self) -> tuple[str, ...]:
        """The env ids, in the given order."""
        return tuple(s.id for s in self.specs)

    @property
    def id(self) -> str:
        """A label for reprs and logs (not a registered id)."""
        parts = [f"{s.id}={p:.3g}" for s, p in zip(self.specs, self.probabilities, strict=True)]
        if len(parts) > 4:
            parts = parts[:3] + [f"... ({len(parts)} ids)"]
        return f"Mixture({', '.join(parts)})"

    def draw(self, rng: random.Random) -> int:
        """The index of one id drawn in proportion to the weights (one ``rng.random()``)."""
        u = rng.random() * self._total
        i = bisect.bisect_right(self._cumulative, u)
        return min(i, self._last_positive)  # float edge: u rounded up to the total

    def make_env(
        self, wrappers: Sequence[WrapperSpec | Callable[[Env], Env]] | None = None
    ) -> MixtureEnv:
        """A `MixtureEnv` over this mix (``wrappers`` go on each id's env)."""
        return MixtureEnv(self, wrappers=wrappers)

    def __repr__(self) -> str:
        return self.id


class MixtureEnv(Env):
    """One env that plays a task id drawn from a `Mixture` at every reset.

    Each id's env is built on first draw with `gem_core.make` (the full stack: passive
    checker, order enforcing, turn limit, the spec's wrappers, then ``wrappers``) and
    kept for later episodes; ``close()`` closes all of them.

    Seeding: ``reset(seed=s)`` draws the id from a generator seeded by ``s`` (salted, so
    the draw is independent of the task's own first draws) and resets that id's env with
    seed ``s``: the episode is exactly ``make(id).reset(seed=s)``'s. ``reset()`` without a
    seed draws the id *and* a fresh seed for the task from the same generator, so a
    vector env's autoresets give a new, reproducible task mix each episode.
    ``reset(options={"env_id": id})`` forces the id (other options go to that env).

    Observation, action, rewards, episode end: those of the drawn id's env. Every reset
    and step info carries ``info["env_id"]`` (the id this episode plays).

    Args:
        mixture: the `Mixture` (or a ``{env_id: weight}`` dict, made into one).
        wrappers: extra wrappers for each id's env (callables ``env -> env`` or
            `WrapperSpec`).
    """

    metadata = {"category": "mixture"}

    def __init__(
        self,
        mixture: Mixture | Mapping[str | EnvSpec, float],
        wrappers: Sequence[WrapperSpec | Callable[[Env], Env]] | None = None,
    ):
        self.mixture = mixture if isinstance(mixture, Mixture) else Mixture(mixture)
        self.wrappers = tuple(wrappers) if wrappers else None
        self._envs: dict[int, Env] = {}
        self._current: int | None = None
        self._mix_rng: random.Random | None = None
        self.closed = False

    @property
    def env_id(self) -> str | None:
        """The id of the current episode (``None`` before the first reset)."""
        return None if self._current is None else self.mixture.specs[self._current].id

    @property
    def current_env(self) -> Env | None:
        """The env playing the current episode."""
        return None if self._current is None else self._envs[self._current]

    def _env(self, k: int) -> Env:
        env = self._envs.get(k)
        if env is None:
            env_spec = self.mixture.specs[k]
            kwargs = self.mixture.env_kwargs.get(env_spec.id, {})
            env = make(env_spec, wrappers=self.wrappers, **kwargs)
            self._envs[k] = env
        return env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self.closed:
            raise ClosedEnvError(f"reset() called on {self} after close(); build a new one")
        super().reset(seed=seed)
        if seed is not None:
            self._mix_rng = random.Random(f"gem_core.mixture:{seeding.check_seed(seed)}")
        elif self._mix_rng is None:
            self._mix_rng = seeding.py_random(None)
        forced = None
        if options is not None and "env_id" in options:
            options = dict(options)
            forced = options.pop("env_id")
            ids = self.mixture.ids
            if forced not in ids:
                raise InvalidArgument(
                    f"reset(options={{'env_id': {forced!r}}}): that id is not in the mix; expected one "
                    f"of {', '.join(ids)}"
                )
            options = options or None
        k = self.mixture.draw(self._mix_rng) if forced is None else self.mixture.ids.index(forced)
        task_seed = seed if seed is not None else self._mix_rng.getrandbits(_SEED_BITS)
        obs, info = self._env(k).reset(seed=task_seed, options=options)
        self._current = k
        info = dict(info)
        info["env_id"] = self.mixture.specs[k].id
        return obs, info

    def step(self, action: Any):
        if self._current is None:
            raise ResetNeeded(f"{self}: step() called before reset(); call env.reset() first")
        obs, reward, terminated, truncated, info = self._envs[self._current].step(action)
        info["env_id"] = self.mixture.specs[self._current].id
        return obs, reward, terminated, truncated, info

    def sample_random_action(self) -> Any:
        if self._current is None:
            raise NotImplementedError(
                "MixtureEnv.sample_random_action needs a reset first (no task yet)"
            )
        return self._envs[self._current].sample_random_action()

    def state_summary(self) -> str | None:
        env = self.current_env
        return None if env is None else env.state_summary()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        errors = []
        for env in self._envs.values():
            try:
                env.close()
            except Exception as e:  # close them all, then report the first failure
                errors.append(e)
        self._envs.clear()
        self._current = None
        if errors:
            raise errors[0]

    def __str__(self) -> str:
        return f"<MixtureEnv<{self.mixture.id}>>"

    __repr__ = __str__
