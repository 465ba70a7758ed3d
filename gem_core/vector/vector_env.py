"""The vector-env contract: `VectorEnv`, `AutoresetMode` and the argument checks they share."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import numpy as np

from gem_core._closing import Closing
from gem_core.core import Env
from gem_core.errors import ClosedEnvError, InvalidArgument, ResetNeeded, WorkerError

__all__ = ["AutoresetMode", "VectorEnv", "StepReturn", "ResetReturn", "ON_ERROR_POLICIES"]

StepReturn = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
ResetReturn = tuple[list[Any], list[dict[str, Any]]]

ON_ERROR_POLICIES = ("report", "raise")

_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)


class AutoresetMode(Enum):
    """When a vector env resets a sub-env whose episode ended (as in Gymnasium 1.x).

    Attributes:
        NEXT_STEP: the default. On the step *after* a sub-env ended, its action is
            ignored and it is reset instead: that step's entry holds the reset
            observation and info, reward ``0.0``, ``terminated=False`` and
            ``truncated=False``.
        SAME_STEP: a sub-env that ends is reset within the same step. Its entry holds
            the reward and flags of the final step but the *reset* observation; the info
            is the reset info plus ``info["final_obs"]`` and ``info["final_info"]`` (the
            final step's observation and info).
        DISABLED: nothing is reset automatically. The caller resets ended sub-envs with
            ``reset(options={"reset_mask": mask})``; stepping an ended sub-env raises
            `ResetNeeded` before anything is stepped.
    """

    NEXT_STEP = "next_step"
    SAME_STEP = "same_step"
    DISABLED = "disabled"

    @classmethod
    def coerce(cls, value: AutoresetMode | str) -> AutoresetMode:
        """Accept a member, its value (``"next_step"``) or its name (``"NEXT_STEP"``)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.strip().lower().replace("-", "_")
            for member in cls:
                if key in (member.value, member.name.lower(), member.value.replace("_", "")):
                    return member
        raise InvalidArgument(
            f"autoreset_mode must be one of {', '.join(f'AutoresetMode.{m.name}' for m in cls)} "
            f"(or their names as strings), got {value!r}"
        )


def check_env_fns(env_fns: Any, owner: str) -> list[Callable[[], Env]]:
    """Return ``env_fns`` as a non-empty list of callables, or raise `InvalidArgument`."""
    if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Sequence):
        raise InvalidArgument(
            f"{owner} expects a list of env factories (callables returning an Env), got "
            f"{type(env_fns).__name__}. To build from ids use gem_core.make_vec(env_id, num_envs)."
        )
    fns = list(env_fns)
    if not fns:
        raise InvalidArgument(f"{owner} needs at least one env factory, got an empty list")
    for i, fn in enumerate(fns):
        if isinstance(fn, Env):
            raise InvalidArgument(
                f"{owner}: env_fns[{i}] is an Env instance ({fn}), not a factory; pass a "
                "callable that builds the env, e.g. functools.partial(gem_core.make, env_id)"
            )
        if not callable(fn):
            raise InvalidArgument(
                f"{owner}: env_fns[{i}] must be a callable returning an Env, got {type(fn).__name__}"
            )
    return fns


def build_envs(env_fns: Sequence[Callable[[], Env]], owner: str) -> list[Env]:
    """Call each factory and check what it built (`check_built_env`); on a failure,
    close the envs built so far and re-raise."""
    envs: list[Env] = []
    try:
        for i, fn in enumerate(env_fns):
            envs.append(check_built_env(fn(), i, owner))
    except BaseException:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass
        raise
    return envs


def check_built_env(env: Any, i: int, owner: str) -> Env:
    """Raise `InvalidArgument` unless the factory ``env_fns[i]`` returned a `gem_core.Env`."""
    if not isinstance(env, Env):
        raise InvalidArgument(
            f"{owner}: env_fns[{i}] returned {type(env).__name__}, not a gem_core.Env; "
            "a factory must build and return the env"
        )
    return env


def check_on_error(on_error: Any) -> str:
    if on_error not in ON_ERROR_POLICIES:
        raise InvalidArgument(f"on_error must be 'report' or 'raise', got {on_error!r}")
    return on_error


def expand_seed(seed: Any, num_envs: int, *, where: str = "reset(seed=...)") -> list[int | None] | None:
    """Per-env seeds: ``None`` → ``None``; int ``s`` → ``[s, s+1, ...]``; a list → checked copy."""
    if seed is None:
        return None
    if isinstance(seed, (list, tuple, np.ndarray)):
        seeds = list(seed.tolist() if isinstance(seed, np.ndarray) else seed)
        if len(seeds) != num_envs:
            raise InvalidArgument(
                f"{where} got a list of {len(seeds)} seeds for {num_envs} sub-envs; pass exactly "
                f"one seed (int or None) per sub-env, or one int s to seed them s, s+1, ..."
            )
        return [None if s is None else _check_one_seed(s, where, i) for i, s in enumerate(seeds)]
    base = _check_one_seed(seed, where, None)
    return [base + i for i in range(num_envs)]


def _check_one_seed(seed: Any, where: str, i: int | None) -> int:
    if isinstance(seed, np.integer):
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        at = f" at position {i}" if i is not None else ""
        raise InvalidArgument(
            f"{where} expects a non-negative int, a list of one int-or-None per sub-env, or None; "
            f"got {seed!r}{at}"
        )
    return seed


def describe_env_fns(env_fns: Sequence[Callable[[], Env]]) -> str:
    """A short label for ``__repr__``: the env id(s) when known, else the factory's name."""
    names: list[str] = []
    for fn in env_fns:
        names.append(_describe_fn(fn))
    unique = list(dict.fromkeys(names))
    if len(unique) == 1:
        return unique[0]
    if len(unique) <= 3:
        return "[" + ", ".join(unique) + "]"
    return f"[{', '.join(unique[:3])}, ... ({len(unique)} kinds)]"


def _describe_fn(fn: Any) -> str:
    if isinstance(fn, functools.partial):
        if fn.args:
            first = fn.args[0]
            ident = getattr(first, "id", first)
            if isinstance(ident, str):
                return ident
        return _describe_fn(fn.func)
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class VectorEnv(Closing):
    """``num_envs`` sub-envs stepped together.

    Returns:
        ``reset(*, seed=None, options=None) -> (observations, infos)``: two lists of
        length ``num_envs``.

        ``step(actions) -> (observations, rewards, terminated, truncated, infos)``:
        a list of observations, a ``float64`` reward array, two ``bool`` arrays and a
        list of per-env info dicts, all of length ``num_envs``.

    Actions:
        A list (or tuple / 1-D array) of ``num_envs`` actions steps every sub-env. A dict
        ``{index: action}`` steps only those sub-envs (*partial stepping*); the entries of
        the sub-envs left out hold ``None`` as observation, reward ``0.0``,
        ``terminated=False``, ``truncated=False`` and a fresh empty info dict, and those
        sub-envs do not move. A left-out sub-env that needs an autoreset is reset the next
        time it is stepped.

    Seeds:
        ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i``; a list gives one seed (or
        ``None``) per sub-env; ``None`` leaves the generators as they are.

    Partial reset:
        ``reset(options={"reset_mask": mask})`` (a list or bool array of length
        ``num_envs``) resets only the sub-envs whose entry is True, in every autoreset
        mode; the entries of the others hold ``None`` and ``{}``. Other keys of ``options``
        are passed to each sub-env's ``reset``.

    Sub-env failures (``on_error``):
        When a sub-env raises from ``step`` or ``reset`` (or, for `AsyncVectorEnv`, its
        worker process dies), every other sub-env is still stepped normally and the vector
        env stays consistent. With ``on_error="report"`` (the default) the failing entry
        holds observation ``None`` (or, under ``SAME_STEP``, the reset observation when
        the reset succeeded), reward ``0.0``, ``terminated=False``, ``truncated=True``
        and ``info["error"]``: a `WorkerError` with the sub-env index, the exception type,
        message and traceback. The sub-env's episode has ended: it is reset like any
        ended sub-env (autoreset, or a ``reset_mask`` under ``DISABLED``). With
        ``on_error="raise"`` the same step completes for every sub-env, and then the
        `WorkerError` of the lowest failing index is raised (its results are lost; the
        failed sub-envs are marked as needing a reset).

    Errors raised before anything is stepped:
        `InvalidArgument` for a wrong-length action list, a bad index or a bad seed;
        `ResetNeeded` for ``step`` before the first ``reset``, or for stepping an ended
        sub-env under ``AutoresetMode.DISABLED``; `ClosedEnvError` after ``close``.

    Attributes:
        num_envs: the number of sub-envs.
        autoreset_mode: the `AutoresetMode`.
        on_error: ``"report"`` or ``"raise"``.
        metadata: ``{"autoreset_mode": autoreset_mode}``.
        closed: whether ``close`` was called.
    """

    num_envs: int
    autoreset_mode: AutoresetMode
    on_error: str
    closed: bool = True  # until __init__ ran (so __del__ of a half-built object is a no-op)

    def __init__(
        self,
        num_envs: int,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        on_error: str = "report",
    ):
        self.num_envs = num_envs
        self.autoreset_mode = AutoresetMode.coerce(autoreset_mode)
        self.on_error = check_on_error(on_error)
        self.metadata: dict[str, Any] = {"autoreset_mode": self.autoreset_mode}
        self.closed = False
        self._has_reset = False
        self._first_reset_seed: list[int | None] | None = None
        self._label = "?"

    # --- the API -------------------------------------------------------------------
    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> ResetReturn:
        """Reset all sub-envs (or those in ``options["reset_mask"]``)."""
        raise NotImplementedError

    def step(self, actions: Sequence[Any] | dict[int, Any]) -> StepReturn:
        """Step all sub-envs (a list of actions) or some of them (``{index: action}``)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close every sub-env and release workers. Safe to call twice."""
        raise NotImplementedError

    def call(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """For each sub-env, ``env.get_wrapper_attr(name)``, called with the arguments when
        callable; returns the list of results."""
        raise NotImplementedError

    def get_attr(self, name: str) -> list[Any]:
        """For each sub-env, ``env.get_wrapper_attr(name)``."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.num_envs

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            try:
                self.close()
            except Exception:  # never raise from a finaliser
                pass

    def __repr__(self) -> str:
        state = ", closed" if self.closed else ""
        return (
            f"{type(self).__name__}({self._label}, num_envs={self.num_envs}, "
            f"autoreset_mode={self.autoreset_mode.name}{state})"
        )

    __str__ = __repr__

    # --- shared checks ---------------------------------------------------------------
    def _check_open(self, method: str) -> None:
        if self.closed:
            raise ClosedEnvError(
                f"{method}() called on {self!r}, which is closed; build a new vector env "
                "(gem_core.make_vec) to continue"
            )

    def _parse_actions(self, actions: Any) -> tuple[list[int] | None, list[Any]]:
        """``(None, actions)`` for a full step, ``(sorted indices, their actions)`` for a dict."""
        n = self.num_envs
        if type(actions) is list or type(actions) is tuple:
            if len(actions) != n:
                raise InvalidArgument(
                    f"step() got {len(actions)} actions for {n} sub-envs; pass a list of exactly "
                    f"{n} actions, or a dict {{index: action}} to step only some sub-envs"
                )
            return None, actions  # type: ignore[return-value]
        if isinstance(actions, dict):
            indices: list[int] = []
            for key in actions:
                if isinstance(key, np.integer):
                    key = int(key)
                if isinstance(key, bool) or not isinstance(key, int):
                    raise InvalidArgument(
                        f"step() got a dict key {key!r} ({type(key).__name__}); partial stepping "
                        f"expects {{index: action}} with int indices in [0, {n})"
                    )
                if not 0 <= key < n:
                    raise InvalidArgument(
                        f"step() got sub-env index {key}, out of range for {n} sub-envs; "
                        f"indices must be in [0, {n - 1}]"
                    )
                indices.append(key)
            indices.sort()
            return indices, [actions[i] for i in indices]
        if isinstance(actions, np.ndarray) and actions.ndim == 1:
            return self._parse_actions(actions.tolist())
        if isinstance(actions, (list, tuple)):  # subclasses of list / tuple
            return self._parse_actions(list(actions))
        raise InvalidArgument(
            f"step() expects a list of {n} actions or a dict {{index: action}}, got "
            f"{type(actions).__name__}"
            + ("; wrap a single action in a list" if isinstance(actions, (str, bytes)) else "")
        )

    def _parse_reset(
        self, seed: Any, options: dict[str, Any] | None
    ) -> tuple[list[int] | None, list[int | None] | None, dict[str, Any] | None]:
        """``(indices or None, seeds aligned with them or None, options for the sub-envs)``."""
        n = self.num_envs
        if seed is None and not self._has_reset and self._first_reset_seed is not None:
            seeds = self._first_reset_seed
        else:
            seeds = expand_seed(seed, n)
        indices: list[int] | None = None
        sub_options = options
        if options is not None:
            if not isinstance(options, dict):
                raise InvalidArgument(
                    f"reset(options=...) expects a dict or None, got {type(options).__name__}"
                )
            if "reset_mask" in options:
                indices = self._parse_mask(options["reset_mask"])
                sub_options = {k: v for k, v in options.items() if k != "reset_mask"} or None
        if indices is not None and seeds is not None:
            seeds = [seeds[i] for i in indices]
        return indices, seeds, sub_options

    def _parse_mask(self, mask: Any) -> list[int]:
        n = self.num_envs
        values = mask.tolist() if isinstance(mask, np.ndarray) else mask
        if isinstance(values, (str, bytes, dict)) or not isinstance(values, Sequence):
            raise InvalidArgument(
                f"options['reset_mask'] must be a list or bool array of length {n}, got "
                f"{type(mask).__name__}"
            )
        if len(values) != n:
            raise InvalidArgument(
                f"options['reset_mask'] has length {len(values)} but there are {n} sub-envs; "
                "pass one bool per sub-env (True = reset it)"
            )
        for i, v in enumerate(values):
            if not isinstance(v, (bool, np.bool_)):
                raise InvalidArgument(
                    f"options['reset_mask'] must hold bools, got {v!r} at position {i}"
                )
        return [i for i, v in enumerate(values) if v]

    def _check_steppable(
        self, indices: list[int] | None, needs_reset: list[bool], exempt: Any = ()
    ) -> None:
        """Raise `ResetNeeded` before anything is stepped when a step is not allowed."""
        if not self._has_reset:
            raise ResetNeeded(f"step() called before reset() on {self!r}; call reset() first")
        if self.autoreset_mode is not AutoresetMode.DISABLED:
            return
        if indices is None:
            if True not in needs_reset:
                return
            ended = [i for i, flag in enumerate(needs_reset) if flag and i not in exempt]
        else:
            ended = [i for i in indices if needs_reset[i] and i not in exempt]
        if ended:
            shown = ", ".join(map(str, ended[:10])) + (", ..." if len(ended) > 10 else "")
            raise ResetNeeded(
                f"step() on sub-env(s) [{shown}] whose episode ended (terminated, truncated or "
                "failed) and autoreset_mode is DISABLED; reset them first with "
                "reset(options={'reset_mask': mask}), or leave them out of a partial step "
                "{index: action}. Nothing was stepped."
            )

    def _raise_failed(self, failed: list[int], infos: list[dict[str, Any]]) -> None:
        """Under ``on_error="raise"``, raise the `WorkerError` of the lowest failing index."""
        first = min(failed)
        error = infos[first].get("error")
        if not isinstance(error, WorkerError):  # pragma: no cover - defensive
            error = WorkerError(f"sub-env {first} failed", index=first)
        others = sorted(set(failed) - {first})
        if others and hasattr(error, "add_note"):
            error.add_note(f"(sub-envs {others} failed in the same call; see their info['error'])")
        raise error


def step_arrays(
    obs: list[Any], rewards: list[Any], terminated: list[Any], truncated: list[Any],
    infos: list[dict[str, Any]],
) -> StepReturn:
    """Pack full-length step columns into the returned types."""
    return obs, np.array(rewards, _F64), _bools(terminated), _bools(truncated), infos


def _bools(flags: list[Any]) -> np.ndarray:
    # Most steps end no episode: an all-False array is 3x cheaper to make from scratch.
    if True in flags:
        return np.array(flags, _BOOL)
    return np.zeros(len(flags), _BOOL)


def scatter_step(
    num_envs: int, positions: Sequence[int], obs: list[Any], rewards: list[Any],
    terminated: list[Any], truncated: list[Any], infos: list[dict[str, Any]],
) -> StepReturn:
    """Full-length step results from the entries of the sub-envs at ``positions``.

    The entries of the other sub-envs hold ``None``, ``0.0``, ``False``, ``False``, ``{}``.
    """
    all_obs: list[Any] = [None] * num_envs
    all_rewards = np.zeros(num_envs, dtype=np.float64)
    all_terminated = np.zeros(num_envs, dtype=np.bool_)
    all_truncated = np.zeros(num_envs, dtype=np.bool_)
    all_infos: list[Any] = [None] * num_envs
    for p, o, info in zip(positions, obs, infos, strict=True):
        all_obs[p] = o
        all_infos[p] = info
    if positions:
        pos = np.fromiter(positions, dtype=np.intp, count=len(positions))
        all_rewards[pos] = np.array(rewards, dtype=np.float64)
        all_terminated[pos] = np.array(terminated, dtype=np.bool_)
        all_truncated[pos] = np.array(truncated, dtype=np.bool_)
    return (
        all_obs,
        all_rewards,
        all_terminated,
        all_truncated,
        [{} if info is None else info for info in all_infos],
    )


def scatter_reset(
    num_envs: int, positions: Sequence[int], obs: list[Any], infos: list[dict[str, Any]]
) -> ResetReturn:
    """Full-length reset results; sub-envs not reset hold ``None`` and ``{}``."""
    all_obs: list[Any] = [None] * num_envs
    all_infos: list[Any] = [None] * num_envs
    for p, o, info in zip(positions, obs, infos, strict=True):
        all_obs[p] = o
        all_infos[p] = info
    return all_obs, [{} if info is None else info for info in all_infos]
