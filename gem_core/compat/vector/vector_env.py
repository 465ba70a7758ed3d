"""Reference-GEM vector envs on gem_core's: SAME_STEP autoreset, compact partial steps, ``env{i}_kwargs``.

Mirrors ``gem.vector.vector_env`` (and its sync/async modules). The sub-envs are stepped
by gem_core's `gem_core.vector.SyncVectorEnv` / `AsyncVectorEnv`; this layer only
translates the reference's conventions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gem_core._closing import Closing
from gem_core.compat.core import reset_options
from gem_core.errors import InvalidArgument
from gem_core.vector import AsyncVectorEnv as _NativeAsync
from gem_core.vector import AutoresetMode
from gem_core.vector import SyncVectorEnv as _NativeSync
from gem_core.vector.vector_env import expand_seed

__all__ = ["ArrayType", "AutoresetMode", "VectorEnv", "SyncVectorEnv", "AsyncVectorEnv", "SubEnvView"]

ArrayType = TypeVar("ArrayType")


class SubEnvView(Sequence):
    """The sub-envs of a `SyncVectorEnv`, read-only: ``vec.envs[i]`` is the env itself.

    Replacing an entry raises ``TypeError`` (gem_core's vector env would keep stepping
    the old one, so the assignment would be silently lost).
    """

    def __init__(self, envs: list[Any]):
        self._envs = envs

    def __getitem__(self, i):  # type: ignore[override]
        return self._envs[i]

    def __len__(self) -> int:
        return len(self._envs)

    def __setitem__(self, i: int, value: Any) -> None:
        raise TypeError(
            "vec.envs is read-only under gem_core.compat: replacing a sub-env would be ignored by "
            "the vector env. Build a new vector env, or reset sub-env i with "
            "vec.reset(**{f'env{i}_kwargs': {...}})"
        )


class VectorEnv(Closing):
    """``num_envs`` gem_core sub-envs with the reference's vector conventions.

    - ``autoreset_mode`` defaults to ``SAME_STEP`` (the reference default): an entry whose
      episode ended holds the final reward and flags and the *reset* observation and
      info (gem_core adds ``info["final_obs"]`` and ``info["final_info"]``).
    - ``reset(seed=None, **{"env{i}_kwargs": {...}})``: sub-env ``i`` gets its own reset
      keywords (``idx`` becomes the gem_core option ``index``).
    - ``step(list)`` steps every sub-env; ``step({i: action, ...})`` steps only those and
      returns *compact* results: one entry per key, in the dict's order.

    Attributes:
        env_ids: the id of each sub-env.
        env_fns: their factories.
        num_envs: the number of sub-envs.
        autoreset_mode: a `gem_core.vector.AutoresetMode`.
    """

    _native_cls: type = _NativeSync

    def __init__(
        self,
        env_ids: Sequence[str],
        env_fns: Sequence[Callable[[], Any]],
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        **native_kwargs: Any,
    ):
        self.env_ids = list(env_ids)
        self.env_fns = list(env_fns)
        self.autoreset_mode = AutoresetMode.coerce(autoreset_mode)
        self._vec = self._native_cls(self.env_fns, autoreset_mode=self.autoreset_mode, **native_kwargs)
        self.num_envs = self._vec.num_envs

    @property
    def native(self):
        """The gem_core vector env underneath."""
        return self._vec

    def reset(self, seed: int | Sequence[int | None] | None = None, **kwargs: Any):
        """Reset every sub-env; ``env{i}_kwargs={...}`` gives sub-env ``i`` reset keywords.

        Returns:
            ``(observations, infos)``, lists of length ``num_envs``.

        Raises:
            InvalidArgument: a keyword that is not ``env{i}_kwargs`` for an existing ``i``,
                or a value that is not a dict.
        """
        n = self.num_envs
        per_env: dict[int, dict[str, Any]] = {}
        for key, value in kwargs.items():
            index = _env_index(key, n)
            if not isinstance(value, dict):
                raise InvalidArgument(f"reset({key}=...) expects a dict of reset keywords, got {type(value).__name__}")
            per_env[index] = value
        if not per_env:
            return self._vec.reset(seed=seed)
        seeds = expand_seed(seed, n)
        obs: list[Any] = [None] * n
        infos: list[dict[str, Any]] = [{} for _ in range(n)]
        rest = [i for i in range(n) if i not in per_env]
        groups = ([(rest, None)] if rest else []) + [
            ([i], reset_options(None, kw)) for i, kw in sorted(per_env.items())
        ]
        for indices, options in groups:
            chosen = set(indices)
            mask = [i in chosen for i in range(n)]
            o, inf = self._vec.reset(seed=seeds, options={"reset_mask": mask, **(options or {})})
            for i in indices:
                obs[i], infos[i] = o[i], inf[i]
        return obs, infos

    def step(self, actions: Sequence[Any] | dict[int, Any]):
        """Step all sub-envs (a list) or some (a dict ``{index: action}``, compact results)."""
        if isinstance(actions, dict):
            obs, rewards, terminated, truncated, infos = self._vec.step(actions)  # checks the keys
            keys = [int(k) for k in actions]
            return (
                [obs[k] for k in keys],
                rewards[keys],
                terminated[keys],
                truncated[keys],
                [infos[k] for k in keys],
            )
        return self._vec.step(actions if isinstance(actions, list) else list(actions))

    def call(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        return self._vec.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> list[Any]:
        return self._vec.get_attr(name)

    def close(self) -> None:
        self._vec.close()

    @property
    def closed(self) -> bool:
        return self._vec.closed

    def __len__(self) -> int:
        return self.num_envs

    def __repr__(self) -> str:
        return f"compat.{type(self).__name__}({self._vec!r})"


def _env_index(key: str, n: int) -> int:
    digits = key[3:-7] if key.startswith("env") and key.endswith("_kwargs") else ""
    if not digits.isdigit() or int(digits) >= n:
        raise InvalidArgument(
            f"reset() got an unexpected keyword {key!r}; per-env reset keywords are "
            f"env0_kwargs ... env{n - 1}_kwargs (dicts)"
        )
    return int(digits)


class SyncVectorEnv(VectorEnv):
    """Sub-envs stepped in turn in this process; ``envs[i]`` is sub-env ``i``."""

    _native_cls = _NativeSync

    @property
    def envs(self) -> SubEnvView:
        return SubEnvView(self._vec.envs)


class AsyncVectorEnv(VectorEnv):
    """Sub-envs stepped in gem_core worker processes (the reference used threads)."""

    _native_cls = _NativeAsync

    @property
    def envs(self) -> SubEnvView:
        raise AttributeError(
            "AsyncVectorEnv sub-envs live in worker processes, so there is no .envs; use "
            "vec.call(name, ...) / vec.get_attr(name), or make_vec(..., async_mode=False)"
        )
