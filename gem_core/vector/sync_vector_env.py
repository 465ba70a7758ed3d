"""`SyncVectorEnv`: sub-envs stepped one after another in the calling process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.vector.batch import SubEnvBatch
from gem_core.vector.vector_env import (
    AutoresetMode,
    ResetReturn,
    StepReturn,
    VectorEnv,
    build_envs,
    check_env_fns,
    describe_env_fns,
    scatter_reset,
    scatter_step,
    step_arrays,
)

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """Steps its sub-envs in turn, in-process, with no copies beyond the returned arrays.

    The right choice for cheap envs (the overhead over a hand-written loop is a few
    percent) and for debugging; use `AsyncVectorEnv` when a step costs real CPU.
    Semantics (autoreset, partial stepping, seeds, failures) are those of `VectorEnv`.

    Example:
        >>> import functools, gem_core
        >>> vec = SyncVectorEnv([functools.partial(gem_core.make, "toy:Echo-v0")] * 2)
        >>> obs, infos = vec.reset(seed=0)
        >>> obs, rewards, terminated, truncated, infos = vec.step(["hello", "world"])

    Args:
        env_fns: one factory per sub-env (a callable with no arguments returning a
            `gem_core.Env`), e.g. ``functools.partial(gem_core.make, "toy:Echo-v0")``.
        autoreset_mode: see `AutoresetMode` (default ``NEXT_STEP``).
        on_error: ``"report"`` (default) or ``"raise"``; see `VectorEnv`.

    Attributes:
        envs: the sub-envs, in index order.

    Raises:
        InvalidArgument: ``env_fns`` is empty or holds something that is not a factory.
        Whatever a factory raises (the sub-envs built so far are closed first).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        on_error: str = "report",
    ):
        fns = check_env_fns(env_fns, "SyncVectorEnv")
        super().__init__(len(fns), autoreset_mode=autoreset_mode, on_error=on_error)
        self.closed = True  # until every sub-env is built
        envs = build_envs(fns, "SyncVectorEnv")
        self.envs = envs
        self._batch = SubEnvBatch(envs, 0, self.autoreset_mode)
        self._label = describe_env_fns(fns)
        # True when a list of actions needs no other check (open, reset, autoreset on).
        self._fast_step = False
        self.closed = False

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> ResetReturn:
        """Reset every sub-env, or those selected by ``options["reset_mask"]``.

        Args:
            seed: ``None``, an int ``s`` (sub-env ``i`` gets ``s + i``) or a list of one
                int-or-None per sub-env.
            options: passed to each sub-env's ``reset``; the key ``"reset_mask"`` (one bool
                per sub-env) selects which sub-envs to reset.

        Returns:
            ``(observations, infos)``, lists of length ``num_envs``.
        """
        self._check_open("reset")
        indices, seeds, sub_options = self._parse_reset(seed, options)
        obs, infos, failed, _ = self._batch.reset(indices, seeds, sub_options)
        self._has_reset = True
        self._fast_step = self.autoreset_mode is not AutoresetMode.DISABLED
        if indices is not None:
            obs, infos = scatter_reset(self.num_envs, indices, obs, infos)
        if failed and self.on_error == "raise":
            self._raise_failed(failed, infos)
        return obs, infos

    def step(self, actions: Sequence[Any] | dict[int, Any]) -> StepReturn:
        """Step every sub-env (a list of ``num_envs`` actions) or some (``{index: action}``).

        Returns:
            ``(observations, rewards, terminated, truncated, infos)``; see `VectorEnv`.
        """
        if type(actions) is list and len(actions) == self.num_envs and self._fast_step:
            indices, acts = None, actions  # the common case, checked in one go
        else:
            self._check_open("step")
            indices, acts = self._parse_actions(actions)
            self._check_steppable(indices, self._batch.needs_reset)
        obs, rewards, terms, truncs, infos, failed, _ = self._batch.step(indices, acts)
        if indices is None:
            result = step_arrays(obs, rewards, terms, truncs, infos)
        else:
            result = scatter_step(self.num_envs, indices, obs, rewards, terms, truncs, infos)
        if failed and self.on_error == "raise":
            self._raise_failed(failed, result[4])
        return result

    def call(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """``env.get_wrapper_attr(name)`` for each sub-env, called with the arguments when
        callable. A failure raises `WorkerError` naming the sub-env."""
        self._check_open("call")
        return self._batch.call(name, args, kwargs, get_only=False)

    def get_attr(self, name: str) -> list[Any]:
        """``env.get_wrapper_attr(name)`` for each sub-env (`WorkerError` on failure)."""
        self._check_open("get_attr")
        return self._batch.call(name, (), {}, get_only=True)

    def close(self) -> None:
        """Close every sub-env (all of them, even if one raises; the first error is re-raised)."""
        if self.closed:
            return
        self.closed = True
        self._fast_step = False
        error = self._batch.close()
        if error is not None:
            raise error
