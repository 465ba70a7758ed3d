"""The YAML of a ROLL agentic run on gem_core envs with exact ReBN (`recipes/roll_rebn.py`).

`roll_config` returns the config as a plain dict, `write_config` writes it where ROLL's
``examples/start_agentic_pipeline.py`` (Hydra ``--config_path/--config_name``, then dacite
into ``AgenticConfig``) reads it. The keys that make it ReBN:

- ``adv_estimator: step_reinforce``, ``step_reward_gamma: γ`` (the per-turn discount),
  ``gamma: 1`` (no second, per-token discount), ``reward_normalization: {grouping: batch,
  method: mean_std}``;
- ``pipeline_cls: gem_roll.pipeline.GemAgenticPipeline`` (population std: exact). ROLL's
  own ``AgenticPipeline`` (``exact=False``) gives ReBN × sqrt((n-1)/n). ROLL's dacite
  loading drops unknown keys silently, so the class is the only switch;
- ``custom_envs.<tag>.env_manager_cls: gem_roll.env_manager.GemStepEnvManager`` (one
  sample per turn, the conversation as `gem_core.rl` plays it) and ``env_type: <gem_core id>``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = [
    "EXACT_PIPELINE",
    "NATIVE_PIPELINE",
    "STEP_ENV_MANAGER",
    "TRAJ_ENV_MANAGER",
    "roll_config",
    "write_config",
]

EXACT_PIPELINE = "gem_roll.pipeline.GemAgenticPipeline"
NATIVE_PIPELINE = "roll.pipeline.agentic.agentic_pipeline.AgenticPipeline"
STEP_ENV_MANAGER = "gem_roll.env_manager.GemStepEnvManager"
TRAJ_ENV_MANAGER = "gem_roll.env_manager.GemTrajEnvManager"

_TAG_BAD = re.compile(r"[^A-Za-z0-9_]")


def _tag(env_id: str) -> str:
    """A ROLL tag for an env id: ``game:GuessTheNumber-v0-easy`` -> ``GuessTheNumber_v0_easy``."""
    name = env_id.partition(":")[2] or env_id
    return _TAG_BAD.sub("_", name)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name} must be an int >= 1, got {value!r}")
    return value


def _check_envs(envs: Sequence[str] | Mapping[str, float], num_env_groups: int) -> list[tuple[str, int]]:
    """``[(env_id, groups)]``: an env list splits the groups evenly, a mapping by weight."""
    import gem_core

    if isinstance(envs, str):
        envs = [envs]
    if isinstance(envs, Mapping):
        items = list(envs.items())
    else:
        items = [(e, 1.0) for e in envs]
    if not items:
        raise InvalidArgument("envs must name at least one gem_core env id, got none")
    for env_id, weight in items:
        if not isinstance(env_id, str):
            raise InvalidArgument(f"env ids must be str, got {env_id!r}")
        gem_core.spec(env_id)  # unknown ids raise NameNotFound with close matches
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0 or not math.isfinite(weight):
            raise InvalidArgument(f"the weight of {env_id!r} must be a finite number > 0, got {weight!r}")
    if len({_tag(e) for e, _ in items}) != len(items):
        raise InvalidArgument(f"envs give the same ROLL tag twice: {[e for e, _ in items]}; list each env once")
    if num_env_groups < len(items):
        raise InvalidArgument(
            f"num_env_groups ({num_env_groups}) must be >= the number of envs ({len(items)}): "
            "every env needs at least one group"
        )
    total = sum(w for _, w in items)
    counts = [max(1, int(num_env_groups * w / total)) for _, w in items]
    counts[counts.index(max(counts))] += num_env_groups - sum(counts)  # exact sum, largest absorbs
    if min(counts) < 1:
        raise InvalidArgument(f"the weights {dict(items)} leave an env without a group; raise num_env_groups")
    return [(e, c) for (e, _), c in zip(items, counts, strict=True)]


def roll_config(
    *,
    model: str,
    envs: Sequence[str] | Mapping[str, float] = ("game:GuessTheNumber-v0-easy",),
    gamma: float = 0.9,
    exact: bool = True,
    env_manager_cls: str = STEP_ENV_MANAGER,
    num_env_groups: int = 8,
    group_size: int = 1,
    max_turns: int | None = None,
    max_tokens_per_step: int = 256,
    sequence_length: int = 4096,
    max_steps: int = 100,
    learning_rate: float = 1e-6,
    num_gpus_per_node: int = 1,
    system_prompt: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    exp_name: str = "gem_roll_rebn",
    output_dir: str = "./output",
    seed: int = 42,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ROLL ``AgenticConfig`` (as a dict) training ``model`` on gem_core ``envs`` with ReBN.

    Args:
        model: the policy (``pretrain``), a Hugging Face id or directory.
        envs: gem_core env ids (groups split evenly) or ``{env_id: weight}`` (a mixture).
        gamma: the per-turn discount γ of the returns (``step_reward_gamma``), in [0, 1].
        exact: ``True``: `EXACT_PIPELINE` (population std, ReBN exactly); ``False``: ROLL's
            own ``AgenticPipeline`` (sample std: ReBN × sqrt((n-1)/n)).
        env_manager_cls: `STEP_ENV_MANAGER` (needed by step_reinforce: one sample per turn).
        num_env_groups: env groups per rollout (``rollout_batch_size`` = groups × size).
        group_size: episodes per group (same seed within a group).
        max_turns: the env's turn limit (``env_config.max_turns``; ``None``: the env's own)
            and ROLL's ``max_steps`` per episode (``None``: 64, the env ends first).
        max_tokens_per_step: per-turn generation cap.
        sequence_length: ROLL's sequence budget (prompt + response of one sample).
        max_steps: training iterations.
        learning_rate: actor learning rate.
        num_gpus_per_node: GPUs for ``device_mapping`` of the actor, the rollout engine and
            the reference.
        system_prompt: a leading system message (``agent_system_template``).
        env_kwargs: ``gem_core.make`` keyword arguments for every env (``env_config``).
        exp_name, output_dir, seed: ROLL's run name, output root and seed.
        overrides: top-level keys to replace in the result (e.g. ``{"track_with": "wandb"}``).

    Returns:
        The config dict (write it with `write_config`).

    Raises:
        InvalidArgument: a value out of range; NameNotFound: an unknown env id.
    """
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
        raise InvalidArgument(f"gamma must be a number in [0, 1], got {gamma!r}")
    for name, value in (
        ("num_env_groups", num_env_groups),
        ("group_size", group_size),
        ("max_tokens_per_step", max_tokens_per_step),
        ("sequence_length", sequence_length),
        ("max_steps", max_steps),
        ("num_gpus_per_node", num_gpus_per_node),
    ):
        _positive_int(name, value)
    if max_tokens_per_step >= sequence_length:
        raise InvalidArgument(
            f"max_tokens_per_step ({max_tokens_per_step}) must be < sequence_length "
            f"({sequence_length}): the prompt needs room too"
        )
    if not isinstance(env_manager_cls, str) or "." not in env_manager_cls:
        raise InvalidArgument(f"env_manager_cls must be a dotted path, got {env_manager_cls!r}")
    if env_kwargs is not None and not isinstance(env_kwargs, Mapping):
        raise InvalidArgument(f"env_kwargs must be a mapping, got {type(env_kwargs).__name__}")
    if max_turns is not None:
        _positive_int("max_turns", max_turns)
    parts = _check_envs(envs, num_env_groups)
    env_config = {} if max_turns is None else {"max_turns": max_turns}
    env_config.update(dict(env_kwargs or {}))
    devices = f"list(range(0,{num_gpus_per_node}))"
    custom_envs = {
        _tag(env_id): {
            "env_type": env_id,
            "max_steps": 64 if max_turns is None else max_turns,
            "max_tokens_per_step": max_tokens_per_step,
            "env_manager_cls": env_manager_cls,
            "agent_system_template": system_prompt,
            # the observation is the whole view a gem_core env gives its agent
            "agent_template": "{observation}",
            "env_config": dict(env_config),
        }
        for env_id, _ in parts
    }
    manager = {
        "max_env_num_per_worker": 16,
        "num_env_groups": num_env_groups,
        "group_size": group_size,
        "tags": [_tag(e) for e, _ in parts],
        "num_groups_partition": [n for _, n in parts],
    }
    config: dict[str, Any] = {
        "hydra": {"run": {"dir": "."}, "output_subdir": None},
        "exp_name": exp_name,
        "seed": seed,
        "logging_dir": f"{output_dir}/logs",
        "output_dir": output_dir,
        "track_with": "tensorboard",
        "tracker_kwargs": {"log_dir": f"{output_dir}/tensorboard"},
        "checkpoint_config": {"type": "file_system", "output_dir": f"{output_dir}/checkpoints/{exp_name}"},
        "pipeline_cls": EXACT_PIPELINE if exact else NATIVE_PIPELINE,
        "num_gpus_per_node": num_gpus_per_node,
        "max_steps": max_steps,
        "save_steps": 10000,
        "logging_steps": 1,
        "eval_steps": 0,
        "resume_from_checkpoint": False,
        "rollout_batch_size": num_env_groups * group_size,
        "val_batch_size": 0,
        "sequence_length": sequence_length,
        # ReBN: per-turn discounted returns, normalised over every turn of the batch
        "adv_estimator": "step_reinforce",
        "step_reward_gamma": float(gamma),
        "gamma": 1.0,
        "lambd": 1.0,
        "reward_normalization": {"grouping": "batch", "method": "mean_std"},
        "whiten_advantages": False,
        "init_kl_coef": 0.0,
        "entropy_loss_coef": 0,
        "max_grad_norm": 1.0,
        "loss_agg_mode": "token-mean",
        "ppo_epochs": 1,
        "batch_adjust_mode": "copy",  # GemAgenticPipeline pads whatever the mode (see gem_roll.pipeline)
        "pretrain": model,
        "reward_pretrain": model,
        "actor_train": {
            "model_args": {"dtype": "bf16", "disable_gradient_checkpointing": False},
            "training_args": {
                "learning_rate": float(learning_rate),
                "weight_decay": 0,
                "per_device_train_batch_size": 1,
                "gradient_accumulation_steps": 1,
                "lr_scheduler_type": "constant",
            },
            "strategy_args": {"strategy_name": "fsdp2_train", "strategy_config": {}},
            "device_mapping": devices,
            "infer_batch_size": 1,
        },
        "actor_infer": {
            "model_args": {"dtype": "bf16", "disable_gradient_checkpointing": True},
            "generating_args": {
                "max_new_tokens": max_tokens_per_step,
                "top_p": 1.0,
                "top_k": -1,
                "num_beams": 1,
                "temperature": 1.0,
                "num_return_sequences": 1,
            },
            "strategy_args": {"strategy_name": "vllm", "strategy_config": {"gpu_memory_utilization": 0.6}},
            "device_mapping": devices,
        },
        "reference": {
            "model_args": {"dtype": "bf16", "disable_gradient_checkpointing": True},
            "strategy_args": {"strategy_name": "hf_infer", "strategy_config": None},
            "device_mapping": devices,
            "infer_batch_size": 1,
        },
        "train_env_manager": manager,
        "val_env_manager": {**manager, "group_size": 1},
        "custom_envs": custom_envs,
    }
    if overrides:
        if not isinstance(overrides, Mapping):
            raise InvalidArgument(f"overrides must be a mapping, got {type(overrides).__name__}")
        config.update(dict(overrides))
    return config


def write_config(config: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``config`` as YAML to ``path`` (a ``.yaml`` file; parents created).

    ROLL reads it with ``start_agentic_pipeline.py --config_path <dir relative to that
    script> --config_name <stem>``.

    Returns:
        The path written.
    """
    import yaml

    p = Path(path)
    if p.suffix != ".yaml":
        raise InvalidArgument(f"the config path must end in .yaml (Hydra's --config_name), got {str(p)!r}")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump(dict(config), sort_keys=False, width=100))
    return p
