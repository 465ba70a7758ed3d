# Launch on one node with 8 GPUs (verl 0.9 with vLLM, plus gem-core and gem-verl):
#
#     pip install -e . -e integrations/verl "verl[vllm]>=0.9.1,<0.10" "tyro>=0.9"
#     python recipes/verl_rebn.py --model-path Qwen/Qwen3-1.7B --n-gpus-per-node 8
#
# Check the command and write the dataset without launching:
#
#     python recipes/verl_rebn.py --dry-run
#
# Variants: --env-id game:GuessTheNumber-v0-hard --gamma 1.0     Every argument: ... --help
# Multi-task: --env-id game:GuessTheNumber-v0-easy game:Sudoku-v0-easy=2 (rows by weight)
# Extra verl (Hydra) overrides go after `--`, e.g. `-- trainer.total_training_steps=20`.
"""Multi-turn REINFORCE + ReBN on GEM envs with verl (the gem_agent loop, the rebn estimator).

1. **Dataset.** One Parquet row per episode to play: the env id and the env seed (train
   seeds ``0..train_seeds-1``, validation seeds from ``val_seed_offset``), plus the
   columns verl's ``RLHFDataset`` needs (a placeholder ``prompt``, ``data_source``,
   ``agent_name="gem_agent"``, ``extra_info``). The env's reset observation is the real
   prompt.
2. **Agent loop config.** A small YAML naming ``gem_agent``'s arguments (turn limit,
   tokens per turn, system prompt), passed as
   ``actor_rollout_ref.rollout.agent.agent_loop_config_path``.
3. **Training.** ``python -m verl.trainer.main_ppo`` (verl's v1 trainer) with
   ``algorithm.adv_estimator=rebn``: each row plays one episode of its env through
   verl's LLM server (``gem_agent``, packed multi-turn sequences, per-turn rewards on
   each turn's last token), then ReBN turns the per-turn rewards into discounted
   returns ``G_t`` (``algorithm.gamma``) normalised over every turn of the batch, and
   verl's PPO actor update trains on them (no critic, no KL in the reward). Both pieces
   come from gem-verl's ``verl.plugins`` entry point: installing gem-verl is enough.

Outputs: verl's (console logger by default; ``-- trainer.logger='[console,wandb]'`` for
more), checkpoints under ``checkpoints/<project>/<experiment>``; the dataset and the
agent loop YAML under ``--data-dir``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

try:  # the names gem-verl registers with verl (light: imports neither verl nor torch)
    from gem_verl import AGENT_LOOP_TARGET, AGENT_NAME, REBN, REWARD_STYLE
except ImportError as exc:
    raise SystemExit(f"recipes/verl_rebn.py needs gem-verl ({exc}): pip install -e integrations/verl") from exc


@dataclass
class Args:
    env_id: tuple[str, ...] = ("game:GuessTheNumber-v0-easy",)
    """the gem_core env(s) the rows play: any registered text env id (`gem list`), each optionally ID=WEIGHT; several make a multi-task mixture, rows in proportion to the weights (default 1 each)"""
    env_module: tuple[str, ...] = ()
    """modules (or .py paths) that register your own envs, imported in every process that builds envs (verl's Ray agent-loop workers); not needed for envs installed with a gem_core.envs entry point (docs/plugins.md)"""
    model_path: str = "Qwen/Qwen3-1.7B"
    """the policy: a Hugging Face model id or local directory"""
    train_seeds: int = 8192
    """training rows: env seeds 0 .. train_seeds-1, one episode each"""
    val_seeds: int = 256
    """validation rows: env seeds val_seed_offset .. val_seed_offset+val_seeds-1"""
    val_seed_offset: int = 1_000_000
    """first validation seed (far from the training seeds)"""
    data_dir: str = "data/verl_rebn"
    """where the Parquet files and the agent loop YAML are written"""
    gamma: float = 0.9
    """discount of the per-turn returns (algorithm.gamma)"""
    max_turns: int | None = None
    """the engine's turn limit per episode (None: the env's own limit)"""
    max_tokens_per_turn: int = 512
    """the most tokens one response may have"""
    system_prompt: str | None = None
    """a leading system message for every episode (None: none)"""
    prompt_length: int = 1024
    """token budget of the first observation (data.max_prompt_length)"""
    response_length: int = 4096
    """token budget of all turns together, generated + env tokens (data.max_response_length)"""
    train_batch_size: int = 128
    """episodes (rows) per training step"""
    rollout_n: int = 1
    """episodes per row (rollout.n; ReBN needs no groups)"""
    ppo_mini_batch_size: int = 64
    """rows per actor update mini-batch"""
    lr: float = 1e-6
    """actor learning rate"""
    temperature: float = 1.0
    """sampling temperature of the rollouts"""
    total_epochs: int = 15
    """passes over the training rows"""
    n_gpus_per_node: int = 8
    """GPUs per node (trainer.n_gpus_per_node)"""
    nnodes: int = 1
    """nodes (trainer.nnodes)"""
    tensor_parallel_size: int = 1
    """vLLM tensor parallel size per rollout replica"""
    gpu_memory_utilization: float = 0.6
    """vLLM's share of each GPU's memory"""
    rollout_name: Literal["vllm", "sglang"] = "vllm"
    """the rollout server: vllm or sglang"""
    project_name: str = "gem"
    """trainer.project_name"""
    experiment_name: str = "verl_rebn"
    """trainer.experiment_name"""
    seed: int = 1
    """data shuffling seed (data.seed)"""
    dry_run: bool = False
    """write the dataset and the agent loop YAML, validate and print the command, do not launch"""


def args_problem(args: Args) -> str | None:
    """What is wrong with a combination of arguments (tyro checks each one's type), or None."""
    from gem_core.errors import InvalidArgument
    from gem_core.rl.recipe_cli import parse_env_mix

    if not 0.0 <= args.gamma <= 1.0:
        return f"--gamma must be in [0, 1], got {args.gamma}"
    try:
        parse_env_mix(args.env_id)
    except InvalidArgument as exc:
        return str(exc)
    for name in (
        "train_seeds", "val_seeds", "prompt_length", "response_length", "train_batch_size", "rollout_n",
        "ppo_mini_batch_size", "max_tokens_per_turn", "total_epochs", "n_gpus_per_node", "nnodes",
        "tensor_parallel_size",
    ):  # fmt: skip
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}"
    if args.ppo_mini_batch_size > args.train_batch_size:
        return (
            f"--ppo-mini-batch-size ({args.ppo_mini_batch_size}) must not exceed "
            f"--train-batch-size ({args.train_batch_size})"
        )
    if args.max_tokens_per_turn > args.response_length:
        return (
            f"--max-tokens-per-turn ({args.max_tokens_per_turn}) must not exceed "
            f"--response-length ({args.response_length}), the budget of all turns together"
        )
    return None


def parse_args(argv: list[str] | None = None) -> tuple[Args, list[str]]:
    """`Args` from ``--kebab-case`` options with tyro (each one's help is the docstring under
    its field); everything after ``--`` is extra Hydra overrides. Exits 2 with a message on a
    bad combination."""
    from gem_core.rl.recipe_cli import parse_recipe_args

    args, extra = parse_recipe_args(Args, argv, description=__doc__, problem=args_problem, passthrough=True)
    return args, extra


def write_dataset(path: Path, env_mix: Sequence[tuple[str, float]], seeds: range) -> int:
    """One Parquet row per seed: the env id (the mixture's, `gem_core.rl.recipe_cli.mix_rows`)
    and seed, plus the columns RLHFDataset needs."""
    import pandas as pd

    from gem_core.rl.recipe_cli import mix_rows

    rows = [
        {
            "data_source": f"gem:{env_id}",
            # A placeholder: gem_agent prompts with the env's reset observation.
            "prompt": [{"role": "user", "content": f"Play {env_id} (seed {seed})."}],
            "agent_name": AGENT_NAME,
            "env_id": env_id,
            "seed": int(seed),
            "reward_model": {"style": REWARD_STYLE, "ground_truth": ""},
            "extra_info": {"index": i, "env_id": env_id, "seed": int(seed)},
        }
        for i, (env_id, seed) in enumerate(mix_rows(env_mix, seeds))
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    return len(rows)


def write_agent_loop_config(path: Path, args: Args) -> None:
    """The agent loop YAML: gem_agent with this run's arguments (JSON is valid YAML)."""
    entry = {
        "name": AGENT_NAME,
        "_target_": AGENT_LOOP_TARGET,
        "max_turns": args.max_turns,
        "max_tokens_per_turn": args.max_tokens_per_turn,
        "system_prompt": args.system_prompt,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([entry], indent=2) + "\n")


def verl_overrides(args: Args, train: Path, val: Path, agent_config: Path) -> list[str]:
    """The Hydra overrides of verl's ``ppo_trainer`` config for this run."""
    opt = lambda v: "null" if v is None else v  # noqa: E731
    return [
        # ReBN: per-turn discounted returns, normalised over the batch; no critic, no KL reward.
        f"algorithm.adv_estimator={REBN}",
        f"algorithm.gamma={args.gamma}",
        "algorithm.use_kl_in_reward=False",
        # The env rows.
        f"data.train_files={train}",
        f"data.val_files={val}",
        f"data.train_batch_size={args.train_batch_size}",
        f"data.max_prompt_length={args.prompt_length}",
        f"data.max_response_length={args.response_length}",
        f"data.seed={args.seed}",
        "data.filter_overlong_prompts=False",
        # The policy and its update.
        f"actor_rollout_ref.model.path={args.model_path}",
        f"actor_rollout_ref.actor.optim.lr={args.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.ppo_mini_batch_size}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        # Rollouts: verl's LLM server, the gem_agent loop.
        f"actor_rollout_ref.rollout.name={args.rollout_name}",
        f"actor_rollout_ref.rollout.n={args.rollout_n}",
        f"actor_rollout_ref.rollout.temperature={args.temperature}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={args.tensor_parallel_size}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={args.gpu_memory_utilization}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_config}",
        # The GPU layout and bookkeeping.
        f"trainer.n_gpus_per_node={args.n_gpus_per_node}",
        f"trainer.nnodes={args.nnodes}",
        f"trainer.total_epochs={args.total_epochs}",
        f"trainer.project_name={args.project_name}",
        f"trainer.experiment_name={args.experiment_name}",
        "trainer.logger=[console]",
        "trainer.val_before_train=True",
        f"trainer.test_freq={opt(10)}",
        f"trainer.save_freq={opt(50)}",
    ]


def env_module_overrides(carried: dict[str, str]) -> list[str]:
    """The env modules' variables in verl's Ray ``runtime_env`` as well, so that workers on
    a cluster started elsewhere (``RAY_ADDRESS``) import them too (a local cluster inherits
    them from this process)."""
    quote = lambda v: "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"  # noqa: E731
    return [f"+ray_kwargs.ray_init.runtime_env.env_vars.{k}={quote(v)}" for k, v in sorted(carried.items())]


def validate(overrides: list[str], env_ids: Sequence[str]) -> list[str]:
    """Compose verl's shipped config with the overrides and check the plugin; returns problems."""
    problems: list[str] = []
    import gem_core

    for env_id in env_ids:
        try:
            gem_core.spec(env_id)
        except Exception as exc:  # unknown env id: "did you mean"
            problems.append(f"env: {exc}")
    try:
        import verl
        from hydra import compose, initialize_config_dir
    except ImportError as exc:
        problems.append(f"verl is not importable ({exc}); install verl>=0.9.1,<0.10 and gem-verl")
        return problems
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    if AGENT_NAME not in _agent_loop_registry or REBN not in ADV_ESTIMATOR_REGISTRY:
        problems.append(
            f"{AGENT_NAME} / {REBN} are not registered after `import verl`: install gem-verl "
            "(pip install -e integrations/verl) so its verl.plugins entry point loads"
        )
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose("ppo_trainer", overrides=overrides)
        if cfg.algorithm.adv_estimator != REBN or cfg.actor_rollout_ref.rollout.agent.default_agent_loop != AGENT_NAME:
            problems.append(f"the composed config does not select {REBN} / {AGENT_NAME}")
        if cfg.actor_rollout_ref.rollout.response_length != cfg.data.max_response_length:
            problems.append("rollout.response_length does not follow data.max_response_length")
    except Exception as exc:
        problems.append(f"verl's config rejects the overrides: {type(exc).__name__}: {exc}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    from gem_core.rl.recipe_cli import parse_env_mix, use_recipe_env_modules

    # Your env modules: imported here (an unknown id then fails the dry run) and in every
    # process verl starts (the variables are inherited; see env_module_overrides).
    carried = use_recipe_env_modules(args.env_module)

    # Prologue: where things go.
    data_dir = Path(args.data_dir).resolve()
    train, val = data_dir / "train.parquet", data_dir / "val.parquet"
    agent_config = data_dir / "agent_loop.yaml"

    # 1. The dataset: env ids and seeds.
    env_mix = parse_env_mix(args.env_id)
    n_train = write_dataset(train, env_mix, range(args.train_seeds))
    n_val = write_dataset(val, env_mix, range(args.val_seed_offset, args.val_seed_offset + args.val_seeds))
    print(f"wrote {n_train} training rows to {train} and {n_val} validation rows to {val}")

    # 2. The agent loop's arguments.
    write_agent_loop_config(agent_config, args)

    # 3. verl's trainer with rebn and gem_agent.
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *verl_overrides(args, train, val, agent_config),
               *env_module_overrides(carried), *extra]
    print("command:\n  " + " \\\n    ".join(shlex.quote(c) for c in command))
    if args.dry_run:
        problems = validate(command[3:], [e for e, _ in env_mix])
        for p in problems:
            print(f"problem: {p}", file=sys.stderr)
        print("dry run: " + ("the command is valid; not launched" if not problems else "fix the problems above"))
        return 1 if problems else 0
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
