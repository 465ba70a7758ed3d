"""The two implementations under test, gem_core ("ours") and gem ("reference"), behind one interface."""

# A benchmark's ``measure(backend, config)`` only talks to a `Backend`, so the same
# measuring code runs against both. Each backend imports its library lazily, inside
# the worker process of its own virtual environment; the two never share an interpreter.

from __future__ import annotations

import contextlib
import io
from typing import Any

from common import Unavailable

__all__ = ["Backend", "OursBackend", "ReferenceBackend", "get_backend", "BACKENDS"]


class Backend:
    """What a benchmark may ask of an implementation.

    Attributes:
        name: ``"ours"`` or ``"reference"`` (the key used in the results).
        module: the import name whose import time is measured.
    """

    name: str = ""
    module: str = ""

    def version(self) -> str:
        raise NotImplementedError

    def env_ids(self) -> list[str]:
        """Every registered env id."""
        raise NotImplementedError

    def has_env(self, env_id: str) -> bool:
        return env_id in set(self.env_ids())

    def make(self, env_id: str) -> Any:
        """One env, built the way a user builds it (the library's own ``make``)."""
        raise NotImplementedError

    def load_vector(self) -> None:
        """Import the vector-env code, so its import time stays out of build timings.

        Raises `Unavailable` when the implementation has no vector envs.
        """

    def make_vec(self, env_id: str, num_envs: int, mode: str) -> Any:
        """A vector env of ``num_envs`` copies; ``mode`` is ``"sync"``, ``"async"`` or
        ``"local"`` (async with the calling process stepping one shard).

        The vector env autoresets on the step after an episode ends (NEXT_STEP) and
        returns ``(obs, rewards, terminated, truncated, infos)`` from ``step(actions)``.
        Raises `Unavailable` when the implementation has no such vector env.
        """
        raise NotImplementedError

    def reset_vec(self, vec: Any, seed: int) -> Any:
        return vec.reset(seed=seed)

    def close(self, env: Any) -> None:
        close = getattr(env, "close", None)
        if callable(close):
            close()

    def close_vec(self, vec: Any) -> None:
        self.close(vec)


class OursBackend(Backend):
    """gem_core, from this clone."""

    name = "ours"
    module = "gem_core"

    def version(self) -> str:
        import gem_core

        return gem_core.__version__

    def env_ids(self) -> list[str]:
        import gem_core

        return sorted(gem_core.registry)

    def make(self, env_id: str) -> Any:
        import gem_core

        return gem_core.make(env_id)

    def load_vector(self) -> None:
        import gem_core

        try:
            gem_core.make_vec  # noqa: B018 - the lazy attribute imports gem_core.vector
        except (ImportError, AttributeError) as e:
            raise Unavailable(f"gem_core.vector is not available yet ({type(e).__name__}: {e})") from e

    def make_vec(self, env_id: str, num_envs: int, mode: str) -> Any:
        import gem_core

        self.load_vector()
        if mode == "local":
            return gem_core.make_vec(env_id, num_envs, vectorization_mode="async", local_shard=True)
        return gem_core.make_vec(env_id, num_envs, vectorization_mode=mode)


class ReferenceBackend(Backend):
    """The reference GEM (PyPI ``gem-llm``), in its own virtual environment."""

    name = "reference"
    module = "gem"

    def version(self) -> str:
        from importlib.metadata import version

        return version("gem-llm")

    def env_ids(self) -> list[str]:
        with _quiet():
            from gem.envs.registration import ENV_REGISTRY

        return sorted(ENV_REGISTRY)

    def make(self, env_id: str) -> Any:
        with _quiet():
            import gem

            return gem.make(env_id)

    def load_vector(self) -> None:
        with _quiet():
            import gem.vector.async_vector_env  # noqa: F401
            import gem.vector.sync_vector_env  # noqa: F401

    def make_vec(self, env_id: str, num_envs: int, mode: str) -> Any:
        # The reference's own `make_vec` prints a line and fixes SAME_STEP autoreset;
        # building its vector classes directly gives the same objects with NEXT_STEP,
        # the semantics our default and the raw loop use.
        from functools import partial

        if mode == "local":
            raise Unavailable("the reference has no local shard")
        with _quiet():
            import gem
            from gem.vector.async_vector_env import AsyncVectorEnv
            from gem.vector.sync_vector_env import SyncVectorEnv
            from gem.vector.vector_env import AutoresetMode

            cls = {"sync": SyncVectorEnv, "async": AsyncVectorEnv}[mode]
            return cls(
                env_ids=[env_id] * num_envs,
                env_fns=[partial(gem.make, env_id) for _ in range(num_envs)],
                autoreset_mode=AutoresetMode.NEXT_STEP,
            )

    def close_vec(self, vec: Any) -> None:
        pool = getattr(vec, "thread_pool_executer", None)  # the reference's spelling
        if pool is not None:
            pool.shutdown(wait=True)
        for env in getattr(vec, "envs", ()):
            self.close(env)


@contextlib.contextmanager
def _quiet():
    """Keep the reference's prints off the worker's stdout."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


BACKENDS: dict[str, type[Backend]] = {"ours": OursBackend, "reference": ReferenceBackend}


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; expected one of {sorted(BACKENDS)}") from None
