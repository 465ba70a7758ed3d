"""`GemArgs`: oat's ``PPOArgs`` with the GEM env settings, and `validate_args` (run before any GPU work)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from oat.algorithms.ppo import PPOArgs

from gem_core.errors import InvalidArgument

__all__ = ["GemArgs", "EnvPlan", "validate_args", "env_plan"]


@dataclass
class GemArgs(PPOArgs):
    """oat's PPO arguments plus the env settings (a tyro dataclass: each field is a flag).

    The defaults that differ from ``PPOArgs`` make oat's own multi-turn learner compute
    ReBN: no critic (``critic_type`` stays ``drgrpo``), ``whiten_adv``, ``beta 0``, one
    sample per turn, the buffer cleared after every learning step, no prompt-based eval.
    """

    env_ids: list[str] = field(default_factory=lambda: ["game:GuessTheNumber-v0-easy"])
    """gem_core env ids; several make a mixture (each episode draws one)."""
    env_weights: list[float] = field(default_factory=list)
    """Mixture weights, one per env id (empty: uniform)."""
    env_modules: list[str] = field(default_factory=list)
    """Modules (or ``.py`` paths) that register your own envs, imported in the launcher and
    in every actor (the arguments travel with oat's program to each launchpad node); not
    needed for envs installed with a ``gem_core.envs`` entry point (docs/plugins.md)."""
    env_kwargs: str = "{}"
    """JSON object of ``gem_core.make`` keyword arguments, for every env; or
    ``{"<env id>": {...}, ...}`` keyed by env id."""
    wrappers: list[str] = field(default_factory=list)
    """Extra wrappers, outermost last: ``module:Callable`` entry points taking the env."""
    env_seeds: list[int] = field(default_factory=list)
    """Fixed episode seeds, played in this order every step (empty: seeds derived from
    ``--seed``, the actor and the step)."""
    episodes_per_step: int = 0
    """Episodes each actor plays per learner step (0: ``len(env_seeds)`` when given, else
    ``rollout_batch_size_per_device``)."""
    max_turns: int | None = None
    """Turn limit of an episode (None: the env's own)."""
    max_response_length: int = 2048
    """The most tokens after the first prompt: every turn's response plus the observations
    between turns (``prompt_max_length`` + this must fit ``max_model_len``)."""
    system_prompt: str | None = None
    """A system message before the first observation."""
    template_kwargs: str = "{}"
    """JSON object of extra ``apply_chat_template`` arguments (e.g. ``{"enable_thinking": false}``)."""
    truncated_response: str = "pass"
    """A response cut by ``generate_max_length``: ``pass`` it to the env or ``penalize`` it
    (ends the episode with ``truncation_reward``)."""
    truncation_reward: float = -1.0
    """The reward of a penalized truncated response."""
    keep_all_transitions: bool = True
    """Keep every transition of a step (exact ReBN over the whole batch). False: oat's
    own behaviour, a random subset of ``rollout_batch_size_per_device`` transitions is
    kept before whitening."""
    batch_wait_s: float = 0.01
    """How long a turn request waits for the other episodes' requests before the batched
    vLLM call goes out (when some episodes are still stepping their envs)."""

    # oat fields with GEM defaults (ReBN through oat's learner).
    gamma: float = 0.9
    whiten_adv: bool = True
    beta: float = 0.0
    num_samples: int = 1
    buffer_clear_every: float = 1
    eval_steps: int = -1


@dataclass(frozen=True)
class EnvPlan:
    """The checked env settings: what an actor plays."""

    env_ids: tuple[str, ...]
    weights: tuple[float, ...]
    kwargs: dict[str, dict[str, Any]]
    wrappers: tuple[Any, ...]

    def make_kwargs(self, env_id: str) -> dict[str, Any]:
        """``gem_core.make`` keyword arguments of ``env_id`` (wrappers included)."""
        out = dict(self.kwargs.get(env_id, {}))
        if self.wrappers:
            out["wrappers"] = list(self.wrappers)
        return out


def _json_object(name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"--{name} must be a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"--{name} must be a JSON object, got {type(value).__name__}: {text!r}")
    return value


def env_plan(args: Any) -> EnvPlan:
    """Parse and check the env settings of ``args`` (no env is made).

    Raises:
        InvalidArgument: an empty or repeated env id list, weights that do not match it,
            kwargs that are not JSON objects, a wrapper that cannot be imported.
    """
    from gem_core.registration import load_entry_point

    ids = tuple(str(e) for e in args.env_ids)
    if not ids:
        raise InvalidArgument("--env_ids is empty: name at least one gem_core env id (gem list)")
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"--env_ids repeats an id: {list(ids)}; give each env once (weights: --env_weights)")
    weights = tuple(float(w) for w in args.env_weights) or tuple(1.0 for _ in ids)
    if len(weights) != len(ids):
        raise InvalidArgument(
            f"--env_weights has {len(weights)} entries for {len(ids)} env ids {list(ids)}; give one per id"
        )
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise InvalidArgument(f"--env_weights must be finite, >= 0 and not all 0, got {list(weights)}")
    raw = _json_object("env_kwargs", args.env_kwargs)
    if raw and all(k in ids for k in raw) and all(isinstance(v, dict) for v in raw.values()):
        kwargs = {e: dict(raw.get(e, {})) for e in ids}
    else:
        kwargs = {e: dict(raw) for e in ids}
    wrappers = []
    for w in args.wrappers:
        try:
            wrappers.append(load_entry_point(w))
        except Exception as exc:
            raise InvalidArgument(
                f"--wrappers {w!r}: expected an importable 'module:Callable' taking the env, "
                f"got {type(exc).__name__}: {exc}"
            ) from None
    return EnvPlan(ids, weights, kwargs, tuple(wrappers))


def validate_args(args: Any, *, make_envs: bool = True) -> EnvPlan:
    """Check ``args`` before any GPU work; with ``make_envs`` make (and close) every env once.

    Catches what oat itself would only report after loading the models (or never): a
    bad env id (with close matches), env kwargs the env refuses, the settings oat's
    multi-turn learner asserts, and the ``--reinforce_update`` path of oat 0.2.4, which
    ends every learning step in ``ZeroDivisionError``.

    Returns:
        The `EnvPlan`.

    Raises:
        InvalidArgument: a setting that cannot work, or an env ``gem_core.make`` refuses
            (the message names the flag; the make error is chained, e.g. ``NameNotFound``
            with close matches).
    """
    import gem_core

    if getattr(args, "reinforce_update", False):
        raise InvalidArgument(
            "--reinforce_update: oat 0.2.4's learning_step divides by the PPO-clip token count, "
            "which stays 0 on this path (ZeroDivisionError after the first update); use the "
            "default PPO-clip path (drop --reinforce_update)"
        )
    for name, want in (("train_batch_size_per_device", 1), ("num_gpus_per_actor", 1), ("num_samples", 1)):
        if getattr(args, name, want) != want:
            raise InvalidArgument(
                f"--{name} must be {want} for oat's multi-turn learner (one sample per turn), "
                f"got {getattr(args, name)}"
            )
    if args.truncated_response not in ("pass", "penalize"):
        raise InvalidArgument(f"--truncated_response must be 'pass' or 'penalize', got {args.truncated_response!r}")
    if args.episodes_per_step < 0:
        raise InvalidArgument(f"--episodes_per_step must be >= 0, got {args.episodes_per_step}")
    if args.batch_wait_s < 0:
        raise InvalidArgument(f"--batch_wait_s must be >= 0, got {args.batch_wait_s}")
    _json_object("template_kwargs", args.template_kwargs)
    try:  # here and in each actor (GemActor validates its own copy of the arguments)
        gem_core.use_env_modules(list(getattr(args, "env_modules", None) or []))
    except InvalidArgument as exc:
        raise InvalidArgument(f"--env_modules: {exc}") from exc.__cause__
    plan = env_plan(args)
    if make_envs:
        for env_id in plan.env_ids:
            kwargs = plan.make_kwargs(env_id)
            try:
                env = gem_core.make(env_id, **kwargs)
            except Exception as exc:
                raise InvalidArgument(
                    f"--env_ids {env_id!r} (--env_kwargs {plan.kwargs[env_id]}) cannot be made: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            env.close()
    return plan
