# Launch on one node with 8 GPUs (OpenRLHF 0.11 with vLLM and flash-attn, plus gem-core and gem-openrlhf):
#
#     pip install -e . "openrlhf[vllm]>=0.11.2,<0.12" "tyro>=0.9" && pip install --no-deps -e integrations/openrlhf
#     ray start --head --node-ip-address 127.0.0.1 --num-gpus 8
#     python recipes/openrlhf_rebn.py --model-path Qwen/Qwen3-1.7B --n-gpus-per-node 8
#
# Check the command with OpenRLHF's real parser and write the dataset without launching
# (works on a CPU machine: missing vllm / flash_attn imports are stood in for parsing only):
#
#     python recipes/openrlhf_rebn.py --dry-run
#
# Variants: --env-id game:GuessTheNumber-v0-hard --gamma 1.0     Every argument: ... --help
# Multi-task: --env-id game:GuessTheNumber-v0-easy game:Sudoku-v0-easy=2 (samples by weight)
# Extra OpenRLHF flags go after `--`, e.g. `-- --ckpt.save_steps 20 --logger.wandb.key KEY`.
"""Multi-turn REINFORCE + ReBN on GEM envs with OpenRLHF (gem-openrlhf's agent executor and ReBN override).

1. **Dataset.** One JSONL line per episode to play: a placeholder ``prompt`` (the env's
   reset observation is the real prompt) and a ``label`` naming the env id and the env
   seed (train seeds ``0..train_seeds-1``, eval seeds from ``eval_seed_offset``) plus the
   executor's per-sample settings (turn limit, tokens per turn, system prompt), written
   by ``gem_openrlhf.agent.make_label``.
2. **Training.** ``python -m gem_openrlhf.train`` = OpenRLHF's own
   ``openrlhf.cli.train_ppo_ray`` with gem-openrlhf's trainer installed:
   ``--train.agent_func_path`` loads the agent executor in every vLLM actor (one gem_core
   episode per sample, packed multi-turn sequences, per-turn rewards carried to the
   trainer), and the experience maker replaces OpenRLHF's advantage step with ReBN:
   per-turn discounted returns ``G_t`` (``--algo.advantage.gamma``) normalised over every
   turn of the batch. ``--algo.advantage.estimator reinforce`` only satisfies OpenRLHF's
   parser; no critic, no KL penalty (``--algo.kl.init_coef 0``).

Outputs: OpenRLHF's (console; ``-- --logger.wandb.key KEY`` for wandb), the model under
``--output-dir``; the dataset under ``--data-dir``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Args:
    env_id: tuple[str, ...] = ("game:GuessTheNumber-v0-easy",)
    """the gem_core env(s) the samples play: any registered text env id (`gem list`), each optionally ID=WEIGHT; several make a multi-task mixture, samples in proportion to the weights (default 1 each)"""
    env_module: tuple[str, ...] = ()
    """modules (or .py paths) that register your own envs, imported in every process that builds envs (OpenRLHF's vLLM Ray actors); not needed for envs installed with a gem_core.envs entry point (docs/plugins.md)"""
    model_path: str = "Qwen/Qwen3-1.7B"
    """the policy: a Hugging Face model id or local directory"""
    train_seeds: int = 8192
    """training samples: env seeds 0 .. train_seeds-1, one episode each"""
    eval_seeds: int = 256
    """evaluation samples: env seeds eval_seed_offset .. eval_seed_offset+eval_seeds-1 (0: no eval)"""
    eval_seed_offset: int = 1_000_000
    """first evaluation seed (far from the training seeds)"""
    data_dir: str = "data/openrlhf_rebn"
    """where the JSONL datasets are written"""
    output_dir: str = "checkpoints/openrlhf_rebn"
    """where OpenRLHF saves the trained model (--ckpt.output_dir)"""
    gamma: float = 0.9
    """discount of the per-turn returns (--algo.advantage.gamma)"""
    max_turns: int | None = None
    """the engine's turn limit per episode (None: the env's own limit)"""
    max_tokens_per_turn: int = 512
    """the most tokens one response may have (--rollout.max_new_tokens)"""
    max_len: int = 4096
    """token budget of a whole episode: first observation + all turns (--data.max_len)"""
    system_prompt: str | None = None
    """a leading system message for every episode (None: none)"""
    rollout_batch_size: int = 128
    """prompts (episodes) per rollout (--rollout.batch_size)"""
    n_samples_per_prompt: int = 1
    """episodes per prompt (ReBN needs no groups)"""
    train_batch_size: int = 64
    """samples per actor update (--train.batch_size)"""
    lr: float = 1e-6
    """actor learning rate (--actor.adam.lr)"""
    temperature: float = 1.0
    """sampling temperature of the rollouts"""
    num_episodes: int = 15
    """passes over the training samples (--train.num_episodes)"""
    n_gpus_per_node: int = 8
    """GPUs per node, shared by the DeepSpeed actor and the vLLM engines (colocated)"""
    nnodes: int = 1
    """nodes"""
    vllm_tensor_parallel_size: int = 1
    """vLLM tensor parallel size per engine"""
    vllm_gpu_memory_utilization: float = 0.5
    """vLLM's share of each GPU's memory"""
    seed: int = 42
    """OpenRLHF's seed (--train.seed)"""
    dry_run: bool = False
    """write the dataset, check and print the command with OpenRLHF's parser, do not launch"""

    # Derived sizes: computed right after parsing (`parse_args`), not options.
    vllm_num_engines: int = field(init=False, default=0)
    """vLLM engines (--vllm.num_engines): the GPUs, --nnodes x --n-gpus-per-node, over --vllm-tensor-parallel-size"""


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
        "train_seeds", "max_tokens_per_turn", "max_len", "rollout_batch_size", "n_samples_per_prompt",
        "train_batch_size", "num_episodes", "n_gpus_per_node", "nnodes", "vllm_tensor_parallel_size",
    ):  # fmt: skip
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}"
    if args.max_tokens_per_turn >= args.max_len:
        return f"--max-tokens-per-turn ({args.max_tokens_per_turn}) must be below --max-len ({args.max_len})"
    if (args.n_gpus_per_node * args.nnodes) % args.vllm_tensor_parallel_size:
        return (
            f"--vllm-tensor-parallel-size ({args.vllm_tensor_parallel_size}) must divide the GPUs "
            f"({args.nnodes} x {args.n_gpus_per_node})"
        )
    return None


def parse_args(argv: list[str] | None = None) -> tuple[Args, list[str]]:
    """`Args` from ``--kebab-case`` options with tyro (each one's help is the docstring under
    its field); everything after ``--`` is extra OpenRLHF flags. Exits 2 with a message on a
    bad combination; then computes the derived sizes."""
    from gem_core.rl.recipe_cli import parse_recipe_args

    args, extra = parse_recipe_args(Args, argv, description=__doc__, problem=args_problem, passthrough=True)
    args.vllm_num_engines = args.n_gpus_per_node * args.nnodes // args.vllm_tensor_parallel_size
    return args, extra


def write_dataset(path: Path, args: Args, seeds: range) -> int:
    """One JSONL line per seed: a placeholder prompt and the label the agent executor plays
    (the env id from the mixture, `gem_core.rl.recipe_cli.mix_rows`)."""
    from gem_openrlhf.agent import make_label

    from gem_core.rl.recipe_cli import mix_rows, parse_env_mix

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for env_id, seed in mix_rows(parse_env_mix(args.env_id), seeds):
            label = make_label(env_id, int(seed), max_turns=args.max_turns,
                               max_tokens_per_turn=args.max_tokens_per_turn, system_prompt=args.system_prompt)
            # The prompt is a placeholder: the executor prompts with the env's reset observation.
            f.write(json.dumps({"prompt": f"Play {env_id} (seed {seed}).", "label": label}) + "\n")
    return len(seeds)


def openrlhf_flags(args: Args, train: Path, evaluation: Path | None) -> list[str]:
    """The flags of OpenRLHF's ``train_ppo_ray`` for this run."""
    from gem_openrlhf.train import AGENT_FILE

    flags = [
        # ReBN: gem-openrlhf's advantage step; "reinforce" only satisfies OpenRLHF's parser.
        "--algo.advantage.estimator", "reinforce",
        "--algo.advantage.gamma", str(args.gamma),
        "--algo.kl.init_coef", "0",
        # The env samples and the agent executor.
        "--train.agent_func_path", AGENT_FILE,
        "--data.prompt_dataset", str(train),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.max_len", str(args.max_len),
        "--rollout.max_new_tokens", str(args.max_tokens_per_turn),
        "--rollout.batch_size", str(args.rollout_batch_size),
        "--rollout.n_samples_per_prompt", str(args.n_samples_per_prompt),
        "--rollout.temperature", str(args.temperature),
        # The policy and its update.
        "--actor.model_name_or_path", args.model_path,
        "--actor.adam.lr", str(args.lr),
        "--train.batch_size", str(args.train_batch_size),
        "--train.num_episodes", str(args.num_episodes),
        "--train.seed", str(args.seed),
        "--ds.zero_stage", "2",
        "--actor.gradient_checkpointing_enable",
        # The GPU layout: actor and vLLM engines colocated on every GPU.
        "--actor.num_nodes", str(args.nnodes),
        "--actor.num_gpus_per_node", str(args.n_gpus_per_node),
        "--vllm.num_engines", str(args.vllm_num_engines),
        "--vllm.tensor_parallel_size", str(args.vllm_tensor_parallel_size),
        "--vllm.gpu_memory_utilization", str(args.vllm_gpu_memory_utilization),
        "--train.colocate_all",
        "--vllm.enable_sleep",
        "--ds.enable_sleep",
        "--ckpt.output_dir", args.output_dir,
    ]
    if evaluation is not None:
        flags += ["--eval.dataset", str(evaluation), "--eval.steps", "10", "--eval.n_samples_per_prompt", "1"]
    return flags


def format_command(command: list[str]) -> str:
    """The command for a shell, one flag and its values per line."""
    lines: list[list[str]] = [[]]
    for part in command:
        if part.startswith("--") and lines[-1]:
            lines.append([])
        lines[-1].append(shlex.quote(part))
    return " \\\n    ".join(" ".join(line) for line in lines)


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    from gem_core.rl.recipe_cli import use_recipe_env_modules

    # Your env modules: imported here and, through the environment this process passes on
    # (OpenRLHF starts a local Ray cluster), in OpenRLHF's vLLM actors.
    use_recipe_env_modules(args.env_module)

    # Prologue: where things go.
    data_dir = Path(args.data_dir).resolve()
    train, evaluation = data_dir / "train.jsonl", (data_dir / "eval.jsonl" if args.eval_seeds else None)

    # 1. The dataset: env ids and seeds in the labels.
    n_train = write_dataset(train, args, range(args.train_seeds))
    print(f"wrote {n_train} training samples to {train}")
    if evaluation is not None:
        seeds = range(args.eval_seed_offset, args.eval_seed_offset + args.eval_seeds)
        print(f"wrote {write_dataset(evaluation, args, seeds)} evaluation samples to {evaluation}")

    # 2. OpenRLHF's trainer with the gem agent executor and ReBN.
    command = [sys.executable, "-m", "gem_openrlhf.train", *openrlhf_flags(args, train, evaluation), *extra]
    print("command:\n  " + format_command(command))
    if args.dry_run:
        from gem_openrlhf.train import parse_args as parse_openrlhf_args

        import gem_core
        from gem_core.rl.recipe_cli import parse_env_mix

        try:
            for env_id, _ in parse_env_mix(args.env_id):
                gem_core.spec(env_id)  # an unknown env id fails here ("did you mean")
            parse_openrlhf_args(command[3:], stub_missing_imports=True)  # exits 2 on a flag it rejects
        except (gem_core.errors.Error, AssertionError) as exc:
            print(f"problem: {type(exc).__name__}: {exc}", file=sys.stderr)
            print("dry run: fix the problems above")
            return 1
        print("dry run: OpenRLHF's parser and gem-openrlhf's checks accept the command; not launched")
        return 0
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
