"""A bridge into gem-llm's registry: `register_gem_core_envs` makes ``gem.make`` build gem_core envs.

For code that calls the reference package itself (``import gem``; ROLL's env managers
above all): after ``register_gem_core_envs()``, ``gem.make("game:GuessTheNumber-v0-easy",
**config)`` returns a `GemCoreEnv` — a ``gem.Env`` subclass playing the gem_core env
with the reference conventions (positional ``reset(seed)``, ``info["suffix"]``,
``terminated=True`` at the turn limit) and the info keys ROLL reads
(``env_instruction`` on reset; ``suffix``, ``metrics``, ``metrics_agg_mode`` on every
step). gem-llm's own tool wrapper works on it (it is a ``gem.Env``).

Needs gem-llm (``pip install --no-deps gem-llm==0.1.0``; 0.0.4 works too). This module
imports it; ``gem_core.compat`` does not.
"""

from __future__ import annotations

from typing import Any

from gem_core.errors import DependencyNotInstalled, RegistrationError

try:
    import gem
    import gem.envs.registration as _gem_registration
except ImportError as e:  # pragma: no cover - exercised where gem-llm is absent
    raise DependencyNotInstalled(
        "gem", purpose="gem_core.compat.gem_llm (the reference package gem-llm)",
        fix="pip install --no-deps gem-llm==0.1.0 (it imports cleanly without its pinned dependencies)",
    ) from e

from gem_core.compat.envs.registration import LEGACY_ALIASES, make, resolve

__all__ = ["GemCoreEnv", "register_gem_core_envs", "METRICS_AGG_MODE"]

METRICS_AGG_MODE = {"success": "last", "action_is_valid": "mean"}
"""How ROLL aggregates the per-step ``info["metrics"]`` of a `GemCoreEnv` over an episode."""


class GemCoreEnv(gem.Env):
    """One gem_core env as a ``gem.Env`` (what `register_gem_core_envs` registers).

    ``reset(seed=None, **kwargs)``: ``info`` gets ``env_instruction`` (``""``: the
    instruction is in the observation) and ``suffix``. ``step(action)``: the reference
    end-of-episode convention (``terminated=True`` when the turn limit truncates), and
    ``info`` gets ``suffix``, ``metrics = {"success": float, "action_is_valid": float}``
    and ``metrics_agg_mode``. ``max_turns`` is a plain attribute (copied by gem-llm's
    ``EnvWrapper``); other attributes are read from the gem_core env.

    Args:
        gem_core_id: the gem_core id (or a gem-llm 0.0.4 alias) to play.
        **kwargs: ``gem_core.compat.make`` kwargs (``seed`` seeds the first reset;
            reference-only kwargs are dropped).
    """

    def __init__(self, gem_core_id: str, **kwargs: Any):
        self.gem_core_id = gem_core_id
        self._kwargs = dict(kwargs)
        self._env = make(gem_core_id, terminate_on_truncation=True, **kwargs)
        try:
            self.max_turns = self._env.get_wrapper_attr("max_turns")
        except AttributeError:
            self.max_turns = None
        self.seed = self._env.seed

    @property
    def gem_core_env(self) -> Any:
        """The `gem_core.compat.CompatEnv` underneath."""
        return self._env

    def reset(self, seed: int | None = None, **kwargs: Any):
        obs, info = self._env.reset(seed, **kwargs)
        info.setdefault("env_instruction", "")
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self._env.step(action)
        invalid = info.get("invalid_action", info.get("format_error", False))
        metrics = dict(info.get("metrics") or {})
        metrics.setdefault("success", float(bool(info.get("success", False))))
        metrics.setdefault("action_is_valid", float(not invalid))
        info["metrics"] = metrics
        info["metrics_agg_mode"] = {**METRICS_AGG_MODE, **(info.get("metrics_agg_mode") or {})}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def sample_random_action(self) -> Any:
        return self._env.sample_random_action()

    def close(self) -> None:
        self._env.close()

    def spawn(self, same_state: bool = False, **kwargs: Any) -> GemCoreEnv:
        """A fresh env of the same id and kwargs (``same_state=True`` is not supported)."""
        if same_state:
            raise NotImplementedError(
                "spawn(same_state=True) is not supported by gem_core envs; spawn a fresh env and "
                "reset it with the episode's seed"
            )
        return GemCoreEnv(self.gem_core_id, **{**self._kwargs, **kwargs})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.__dict__["_env"] if "_env" in self.__dict__ else None, name)

    def __repr__(self) -> str:
        return f"GemCoreEnv({self.gem_core_id!r})"


def _is_ours(spec: Any) -> bool:
    return spec.entry_point is GemCoreEnv


def _is_gem_llm_builtin(spec: Any) -> bool:
    ep = spec.entry_point
    module = ep.partition(":")[0] if isinstance(ep, str) else getattr(ep, "__module__", "") or ""
    return module == "gem" or module.startswith("gem.")


def register_gem_core_envs(
    prefix: str = "",
    ids: list[str] | None = None,
    override: bool = False,
    *,
    aliases: bool = True,
) -> list[str]:
    """Register gem_core envs into gem-llm's registry (``gem.envs.registration.ENV_REGISTRY``).

    Each gem_core id ``x`` (or each of ``ids``) becomes ``prefix + x``, built by
    `GemCoreEnv`. With ``aliases``, the plain ``game:*-v0`` ids of gem-llm 0.0.4 that
    ROLL's configs use (`gem_core.compat.envs.registration.LEGACY_ALIASES`) are
    registered too (when ``ids`` is None). gem-llm's own registration of the same id is
    replaced — that is the point, so ``gem.make`` builds gem_core's env; pass a
    ``prefix`` (e.g. ``"gem_core/"``) to keep both. Calling again is harmless.

    Args:
        prefix: put before every registered id.
        ids: gem_core ids (or 0.0.4 aliases) to register; default: all of them.
        override: also replace ids registered by someone else (user code, ROLL).
        aliases: register the 0.0.4 aliases (only when ``ids`` is None).

    Returns:
        The ids registered in gem-llm's registry.

    Raises:
        NameNotFound / VersionNotFound: an entry of ``ids`` gem_core does not know (with
            close matches).
        RegistrationError: a target id registered by code other than gem-llm and
            gem_core, without ``override`` (nothing is registered then).
    """
    import gem_core

    if not isinstance(prefix, str):
        raise RegistrationError(f"prefix must be a str, got {type(prefix).__name__}")
    if ids is None:
        sources = sorted(gem_core.registry)
        if aliases:
            sources += [a for a in LEGACY_ALIASES if a not in sources]
    else:
        if isinstance(ids, str):
            ids = [ids]
        sources = list(ids)
        for source in sources:
            resolve(source)
    registry = _gem_registration.ENV_REGISTRY
    targets = [(prefix + source, source) for source in sources]
    conflicts = [
        target
        for target, _ in targets
        if target in registry and not _is_ours(registry[target]) and not _is_gem_llm_builtin(registry[target])
    ]
    if conflicts and not override:
        shown = ", ".join(conflicts[:10]) + (f", ... ({len(conflicts)} in all)" if len(conflicts) > 10 else "")
        raise RegistrationError(
            f"register_gem_core_envs: {shown} already registered in gem-llm's registry by other "
            "code; pass prefix='gem_core/' to register under new ids, or override=True to replace "
            "them. Nothing was registered."
        )
    spec_cls = _gem_registration.EnvSpec
    for target, source in targets:
        registry[target] = spec_cls(id=target, entry_point=GemCoreEnv, kwargs={"gem_core_id": source})
    return [target for target, _ in targets]
