"""`make_vec`: build a sync or async vector env from registered env ids."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gem_core.core import Env
from gem_core.errors import InvalidArgument, check_positive_int
from gem_core.registration import EnvSpec, WrapperSpec, make, spec
from gem_core.vector.async_vector_env import AsyncVectorEnv
from gem_core.vector.mixture import Mixture, MixtureEnv
from gem_core.vector.sync_vector_env import SyncVectorEnv
from gem_core.vector.vector_env import AutoresetMode, VectorEnv, expand_seed

__all__ = ["make_vec", "VECTORIZATION_MODES"]

VECTORIZATION_MODES = ("sync", "async", "ray")
_OPTIONS = {
    "sync": ("on_error",),
    "async": ("on_error", "num_workers", "context", "timeout", "busy_poll", "local_shard"),
    "ray": ("on_error", "num_workers", "timeout", "ray_options", "address", "connect_timeout"),
}


def make_vec(
    env_id: str | EnvSpec | Sequence[str | EnvSpec] | Mixture | Mapping[str | EnvSpec, float],
    num_envs: int | None = None,
    *,
    vectorization_mode: str = "sync",
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    seed: int | Sequence[int | None] | None = None,
    wrappers: Sequence[WrapperSpec | Callable[[Env], Env]] | None = None,
    env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
    **vector_kwargs: Any,
) -> VectorEnv:
    """Build ``num_envs`` sub-envs with `gem_core.make` and vectorize them.

    Each sub-env gets the full `make` stack (passive checker, `OrderEnforcing`,
    `TimeLimit`, the spec's wrappers, then ``wrappers``). Ids are resolved here, so an
    unknown id fails at once with close matches; the factories carry the `EnvSpec`
    itself, so they work under every multiprocessing start method.

    Multi-task mixtures: pass ``{env_id: weight, ...}`` (or a `Mixture`, which also
    takes per-id constructor kwargs). Every sub-env is then a `MixtureEnv` that draws
    its id at every reset — autoresets included — in proportion to the weights,
    reproducibly from its seed, and reports it in ``info["env_id"]``. A fixed split
    (sub-env ``i`` always plays one id) is a plain list of ids instead.

    Example:
        >>> vec = make_vec("toy:Echo-v0", 4, vectorization_mode="async", seed=0)
        >>> obs, infos = vec.reset()           # seeds 0, 1, 2, 3
        >>> obs, rewards, terminated, truncated, infos = vec.step(["abc"] * 4)
        >>> vec.close()
        >>> mix = make_vec({"game:GuessTheNumber-v0-easy": 0.5, "rg:leg_counting": 0.5}, 8, seed=0)
        >>> obs, infos = mix.reset()
        >>> [info["env_id"] for info in infos]  # a fresh draw per sub-env and per episode

    Args:
        env_id: one id (or `EnvSpec`) for every sub-env, a list with one per sub-env, or
            a weighted mixture (a `Mixture` or a dict ``{env_id: weight}``).
        num_envs: the number of sub-envs; default: the length of the ``env_id`` list,
            or 1.
        vectorization_mode: ``"sync"`` (`SyncVectorEnv`), ``"async"`` (`AsyncVectorEnv`) or
            ``"ray"`` (`gem_core.distributed.RayVectorEnv`: sub-envs on Ray actors; needs
            ``gem-core[ray]``).
        autoreset_mode: see `AutoresetMode` (default ``NEXT_STEP``).
        seed: seeds of the first ``reset()`` called without a seed: an int ``s`` seeds
            sub-env ``i`` with ``s + i``; a list gives one int-or-None per sub-env. Later
            resets use their own ``seed`` argument.
        wrappers: extra wrappers applied to every sub-env, outermost (callables
            ``env -> env`` or `WrapperSpec`; picklable for the async mode unless the start
            method is fork).
        env_kwargs: constructor kwargs for every sub-env (a dict), or one dict per
            sub-env (a list). ``max_turns`` here overrides the spec's turn limit. Not
            with a mixture: give per-id kwargs as ``Mixture(weights, env_kwargs={id: {...}})``.
        **vector_kwargs: options of the vector class: ``on_error`` (both modes);
            ``num_workers``, ``context``, ``timeout`` (async); ``num_workers``, ``timeout``,
            ``ray_options``, ``address``, ``connect_timeout`` (ray).

    Returns:
        The vector env (not reset yet).

    Raises:
        InvalidArgument: a list of ids, kwargs or seeds whose length is not ``num_envs``;
            a bad ``num_envs``, mode or option; bad mixture weights (see `Mixture`).
        NameNotFound / VersionNotFound: an unknown id (with close matches).
        InvalidKwarg / EnvConstructionError: building a sub-env failed.
    """
    mixture: Mixture | None = None
    if isinstance(env_id, Mapping):
        env_id = Mixture(env_id)
    if isinstance(env_id, Mixture):
        mixture, ids = env_id, None
        if num_envs is None:
            num_envs = 1
    elif isinstance(env_id, (list, tuple)):
        ids = list(env_id)
        if num_envs is None:
            num_envs = len(ids)
    else:
        ids = None
        if num_envs is None:
            num_envs = 1
    check_positive_int("num_envs", num_envs)
    if mixture is not None:
        pass
    elif ids is None:
        ids = [env_id] * num_envs
    elif len(ids) != num_envs:
        raise InvalidArgument(
            f"make_vec got {len(ids)} env ids for num_envs={num_envs}; pass exactly one id per "
            "sub-env, or a single id to use it for all of them"
        )
    if vectorization_mode not in VECTORIZATION_MODES:
        raise InvalidArgument(
            f"vectorization_mode must be 'sync', 'async' or 'ray', got {vectorization_mode!r}"
        )
    allowed = _OPTIONS[vectorization_mode]
    unknown = sorted(set(vector_kwargs) - set(allowed))
    if unknown:
        raise InvalidArgument(
            f"make_vec(vectorization_mode={vectorization_mode!r}) got unknown option(s) "
            f"{', '.join(map(repr, unknown))}; it accepts {', '.join(allowed)}. Env constructor "
            "arguments go in env_kwargs={...}."
        )
    autoreset_mode = AutoresetMode.coerce(autoreset_mode)
    seeds = expand_seed(seed, num_envs, where="make_vec(seed=...)")

    if mixture is not None and env_kwargs is not None:
        raise InvalidArgument(
            "make_vec got env_kwargs with a mixture; ids take different arguments, so give them "
            "per id: make_vec(Mixture(weights, env_kwargs={env_id: {...}}), ...)"
        )
    if env_kwargs is None:
        kwargs_list: list[dict[str, Any]] = [{}] * num_envs
    elif isinstance(env_kwargs, dict):
        kwargs_list = [env_kwargs] * num_envs
    elif isinstance(env_kwargs, (list, tuple)):
        if len(env_kwargs) != num_envs:
            raise InvalidArgument(
                f"make_vec got {len(env_kwargs)} env_kwargs dicts for num_envs={num_envs}; pass "
                "one dict per sub-env, or a single dict for all of them"
            )
        kwargs_list = list(env_kwargs)
    else:
        raise InvalidArgument(
            f"env_kwargs must be a dict or a list of dicts, got {type(env_kwargs).__name__}"
        )
    for i, kw in enumerate(kwargs_list):
        if not isinstance(kw, dict):
            raise InvalidArgument(f"env_kwargs[{i}] must be a dict, got {type(kw).__name__}")
    if wrappers is not None and (isinstance(wrappers, (str, bytes)) or not isinstance(wrappers, Sequence)):
        raise InvalidArgument(
            f"wrappers must be a list of callables env -> env (or WrapperSpec), got {type(wrappers).__name__}"
        )
    extra = tuple(wrappers) if wrappers else None

    if mixture is not None:
        env_fns: list[Callable[[], Env]] = [
            functools.partial(MixtureEnv, mixture, wrappers=extra) for _ in range(num_envs)
        ]
    else:
        specs = [i if isinstance(i, EnvSpec) else spec(i) for i in ids]
        env_fns = [
            functools.partial(make, env_spec, wrappers=extra, **kw)
            for env_spec, kw in zip(specs, kwargs_list, strict=True)
        ]
    if vectorization_mode == "ray":
        from gem_core.distributed.vector import RayVectorEnv as cls
    else:
        cls = SyncVectorEnv if vectorization_mode == "sync" else AsyncVectorEnv
    vec = cls(env_fns, autoreset_mode=autoreset_mode, **vector_kwargs)
    vec._first_reset_seed = seeds
    return vec
