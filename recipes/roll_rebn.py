# Launch on one node with N GPUs, next to a ROLL source checkout (alibaba/ROLL, tested at
# 8eb27cc; ROLL is not on PyPI):
#
#     git clone https://github.com/alibaba/ROLL && cd ROLL && pip install -r requirements_torch280_vllm.txt
#     pip install -e /path/to/gem -e /path/to/gem/integrations/roll
#     PYTHONPATH=$PWD python /path/to/gem/recipes/roll_rebn.py --roll-src $PWD \
#         --model Qwen/Qwen3-1.7B --env game:GuessTheNumber-v0-easy --num-gpus 8
#
# It writes the run's YAML (default runs/roll_rebn/roll_rebn.yaml) and runs ROLL's own
# launcher on it:
#
#     python $ROLL/examples/start_agentic_pipeline.py --config_path <yaml dir, relative> --config_name roll_rebn
#
# A mixture: `--env game:GuessTheNumber-v0-easy=1 --env game:Sudoku-v0-easy=2` (groups split
# by weight). `--native` uses ROLL's own AgenticPipeline (sample std: ReBN x sqrt((n-1)/n)).
# Write and print the YAML and the command without launching: `--dry-run`. Every argument: --help.
"""Multi-turn REINFORCE + ReBN on GEM envs with ROLL's agentic pipeline (gem_roll).

1. **Envs.** Each gem_core env is one ``custom_envs`` tag: ``env_type`` is the gem_core id
   (gem_roll registers gem_core's ids into gem-llm's registry, which ROLL's env managers
   ``gem.make``), ``env_manager_cls: gem_roll.env_manager.GemStepEnvManager`` plays it: one
   sample per turn, the conversation as gem_core.rl renders it, an episode ending on
   ``terminated`` or ``truncated``.
2. **Advantages.** ``adv_estimator: step_reinforce``: per-turn discounted returns ``G_t``
   (``step_reward_gamma`` = γ) per trajectory, normalised over every turn of the batch
   (``reward_normalization: {grouping: batch, method: mean_std}``), the same value on every
   token of the turn (``gamma: 1``). ``pipeline_cls: gem_roll.pipeline.GemAgenticPipeline``
   uses the population std: ReBN exactly.
3. **Training.** ROLL's actor (FSDP2), rollout engine (vLLM) and PPO-clip loss, no critic,
   no KL (``init_kl_coef: 0``).

Outputs: ROLL's (tensorboard under ``<out>/tensorboard``), checkpoints under
``<out>/checkpoints``, logs under ``<out>/logs``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gem_roll.config import roll_config, write_config

from gem_core.errors import InvalidArgument


@dataclass
class Args:
    """The recipe's arguments (each is a ``--flag``)."""

    model: str = "Qwen/Qwen3-1.7B"
    """The policy: a Hugging Face id or directory (ROLL's ``pretrain``)."""
    env: list[str] = field(default_factory=lambda: ["game:GuessTheNumber-v0-easy"])
    """gem_core env ids, each optionally ``=weight`` (a mixture)."""
    env_module: list[str] = field(default_factory=list)
    """A module (or .py path) that registers your own envs, imported in every process that builds envs (ROLL's env workers); repeatable; not needed for envs installed with a gem_core.envs entry point (docs/plugins.md)."""
    gamma: float = 0.9
    """The per-turn discount γ (``step_reward_gamma``)."""
    native: bool = False
    """Use ROLL's own AgenticPipeline (ReBN x sqrt((n-1)/n)) instead of the exact class."""
    num_env_groups: int = 64
    """Env groups per rollout batch."""
    group_size: int = 1
    """Episodes per group (same seed within a group)."""
    max_turns: int | None = None
    """Turn limit per episode (default: the env's own)."""
    max_tokens_per_step: int = 256
    """Per-turn generation cap."""
    sequence_length: int = 4096
    """ROLL's sequence budget per sample."""
    max_steps: int = 200
    """Training iterations."""
    learning_rate: float = 1e-6
    """Actor learning rate."""
    num_gpus: int = 8
    """GPUs of the node (device_mapping of actor, rollout engine and reference)."""
    out: str = "runs/roll_rebn"
    """Output dir (the YAML, logs, checkpoints)."""
    roll_src: str = os.environ.get("GEM_ROLL_SRC", "")
    """ROLL's source tree (GEM_ROLL_SRC), holding examples/start_agentic_pipeline.py."""
    seed: int = 42
    """ROLL's seed."""
    dry_run: bool = False
    """Write the YAML and print the command; launch nothing."""


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Args()
    for name, value in vars(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, action="store_true")
        elif isinstance(value, list):
            parser.add_argument(flag, action="append", default=None)
        elif name == "max_turns":
            parser.add_argument(flag, type=int, default=None)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    ns = parser.parse_args(argv)
    for name, value in vars(defaults).items():  # an append flag not given: its default
        if isinstance(value, list) and getattr(ns, name) is None:
            setattr(ns, name, list(value))
    return Args(**vars(ns))


def parse_envs(specs: list[str]) -> dict[str, float]:
    """``["id", "id2=2"]`` -> ``{"id": 1.0, "id2": 2.0}`` (`gem_core.rl.recipe_cli.parse_env_mix`:
    each id once, weights finite, >= 0 and not all 0)."""
    from gem_core.rl.recipe_cli import parse_env_mix

    return dict(parse_env_mix(specs, flag="--env"))


def launch_command(roll_src: str, yaml_path: Path) -> list[str]:
    """ROLL's own launcher on the YAML (Hydra's --config_path is relative to the launcher)."""
    launcher = Path(roll_src) / "examples" / "start_agentic_pipeline.py"
    if not launcher.is_file():
        raise InvalidArgument(
            f"no ROLL launcher at {launcher}: pass --roll-src (or GEM_ROLL_SRC) naming a ROLL "
            "checkout (git clone https://github.com/alibaba/ROLL)"
        )
    rel = os.path.relpath(yaml_path.parent.resolve(), launcher.parent.resolve())
    return [sys.executable, str(launcher), "--config_path", rel, "--config_name", yaml_path.stem]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import gem_core
    from gem_core.rl.recipe_cli import use_recipe_env_modules

    # Your env modules: imported here and, through the environment the launcher inherits,
    # in ROLL's env workers.
    use_recipe_env_modules(args.env_module)
    try:
        envs = parse_envs(args.env)
    except InvalidArgument as exc:
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        return 2
    for env_id in envs:
        try:
            gem_core.spec(env_id)  # an unknown id fails here, with "did you mean" and the fixes
        except gem_core.errors.UnregisteredEnv as exc:
            print(f"{Path(sys.argv[0]).name}: error: --env {env_id}: {exc}", file=sys.stderr)
            return 2
    out = Path(args.out).resolve()
    config = roll_config(
        model=args.model,
        envs=envs,
        gamma=args.gamma,
        exact=not args.native,
        num_env_groups=args.num_env_groups,
        group_size=args.group_size,
        max_turns=args.max_turns,
        max_tokens_per_step=args.max_tokens_per_step,
        sequence_length=args.sequence_length,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        num_gpus_per_node=args.num_gpus,
        exp_name="roll_rebn",
        output_dir=str(out),
        seed=args.seed,
    )
    yaml_path = write_config(config, out / "roll_rebn.yaml")
    print(f"wrote {yaml_path}")
    if not args.roll_src:
        if args.dry_run:
            print("(no --roll-src / GEM_ROLL_SRC: the launch command needs ROLL's checkout)")
            return 0
        raise InvalidArgument("pass --roll-src (or set GEM_ROLL_SRC) naming a ROLL checkout")
    cmd = launch_command(args.roll_src, yaml_path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (args.roll_src, env.get("PYTHONPATH", "")) if p)
    env.setdefault("ROLL_LOG_DIR", str(out / "logs"))
    print("PYTHONPATH=" + shlex.quote(env["PYTHONPATH"]) + " " + shlex.join(cmd))
    if args.dry_run:
        return 0
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
