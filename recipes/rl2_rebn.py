# Launch on one node with 8 GPUs. RL2 comes in two versions with different env APIs;
# gem_rl2's env file serves both, the recipe writes the overrides of the one installed.
#
# rl-square 0.0.2 (PyPI; torch 2.8, SGLang 0.5.2, flash-attn from its own pins):
#
#     pip install -e . -e integrations/rl2 rl-square==0.0.2
#     python recipes/rl2_rebn.py --model-path Qwen/Qwen3-1.7B --nproc-per-node 8
#
# RL2 HEAD (source only; tested at 9161ede):
#
#     git clone https://github.com/ChenmienTan/RL2 && pip install -e RL2
#     pip install -e . -e integrations/rl2
#     python recipes/rl2_rebn.py --model-path Qwen/Qwen3-1.7B --nproc-per-node 8
#
# Both run `torchrun --nproc_per_node=8 -m gem_rl2.train <overrides>`. Check the command
# and write the dataset without launching: `python recipes/rl2_rebn.py --dry-run`
# (`--rl2-version head|0.0.2` when RL2 is not installed here). Every argument: --help.
# Extra RL2 (Hydra) overrides go after `--`, e.g. `-- trainer.save_freq=32`.
# Multi-task: --env-id game:GuessTheNumber-v0-easy --env-id game:Sudoku-v0-easy=2 (rows by weight)
"""Multi-turn REINFORCE + ReBN on GEM envs with RL2 (gem_rl2's env file, adv.estimator=rebn).

1. **Dataset.** One JSONL row per episode to play: ``{"extra_info": {"env_id", "seed",
   ...}}`` (train seeds ``0..train_seeds-1``, test seeds from ``test_seed_offset``), plus
   the episode settings gem_rl2's env file reads (turn limit, system prompt). RL2 has no
   prompt column for these rows: the env's reset observation is the prompt.
2. **Training.** ``torchrun -m gem_rl2.train``: RL2's PPO trainer after gem_rl2 wraps
   its ``compute_advantages`` with ``adv.estimator=rebn``. Each row plays one episode of
   its env through RL2's SGLang server (``rollout.env_path`` = gem_rl2's env file;
   0.0.2: RL2's ``reset``/``step`` loop, HEAD: the file's ``generate``), with each
   turn's reward on the turn's last token; ReBN turns the per-turn rewards into
   discounted returns ``G_t`` (``adv.gamma``) normalised over every turn of the batch;
   RL2's PPO actor trains on them (no critic, no KL).

Outputs: RL2's (wandb when ``--use-wandb``), checkpoints under RL2's
``trainer.save_dir``; the dataset under ``--data-dir``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Args:
    env_id: list[str] = field(default_factory=lambda: ["game:GuessTheNumber-v0-easy"])
    """the gem_core env the rows play: any registered text env id (`gem list`), optionally ID=WEIGHT; repeatable: several make a multi-task mixture, rows in proportion to the weights (default 1 each)"""
    env_module: list[str] = field(default_factory=list)
    """a module (or .py path) that registers your own envs, imported in every process that builds envs (each torchrun rank); repeatable; not needed for envs installed with a gem_core.envs entry point (docs/plugins.md)"""
    model_path: str = "Qwen/Qwen3-1.7B"
    """the policy: a Hugging Face model id or local directory"""
    rl2_version: str = "auto"
    """the RL2 API to write overrides for: auto (the installed RL2), 0.0.2 or head"""
    train_seeds: int = 8192
    """training rows: env seeds 0 .. train_seeds-1, one episode each"""
    test_seeds: int = 256
    """test rows: env seeds test_seed_offset .. test_seed_offset+test_seeds-1"""
    test_seed_offset: int = 1_000_000
    """first test seed (far from the training seeds)"""
    data_dir: str = "data/rl2_rebn"
    """where the JSONL files are written"""
    gamma: float = 0.9
    """discount of the per-turn returns (adv.gamma)"""
    max_turns: int = 8
    """turns per episode at most (0.0.2: rollout.max_turns; HEAD: the env file's limit)"""
    max_tokens_per_turn: int = 512
    """the most tokens one response may have (sampling max_new_tokens)"""
    system_prompt: str | None = None
    """a leading system message for every episode (None: none)"""
    prompts_per_rollout: int = 128
    """episodes (rows) per training step"""
    max_length_per_device: int = 8192
    """tokens per device in the actor's forward (actor.max_length_per_device)"""
    lr: float = 1e-6
    """actor learning rate (0.0.2: actor.lr; HEAD: actor.optimizer.lr)"""
    temperature: float = 1.0
    """sampling temperature of the rollouts"""
    total_steps: int = 200
    """training steps (HEAD: trainer.total_steps; 0.0.2 runs trainer.n_epochs=1 over the rows)"""
    nproc_per_node: int = 8
    """GPUs on the node (torchrun --nproc_per_node)"""
    tp_size: int = 1
    """SGLang tensor parallel size (rollout.server_args.tp_size)"""
    project: str = "gem"
    """trainer.project"""
    experiment_name: str = "rl2_rebn"
    """trainer.experiment_name"""
    use_wandb: bool = False
    """log to wandb (trainer.use_wandb)"""
    dry_run: bool = False
    """write the dataset, validate and print the command, do not launch"""


VERSIONS = ("auto", "0.0.2", "head")


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each dataclass field (the CleanRL/tyro convention), by name."""
    body = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant):
                docs[node.target.id] = " ".join(str(nxt.value.value).split())
    return docs


def parse_args(argv: list[str] | None = None) -> tuple[Args, list[str]]:
    """`Args` from ``--kebab-case`` options; everything after ``--`` is extra Hydra overrides."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    docs = field_docs(Args)
    scalars = {"int": int, "float": float, "str": str}
    for f in dataclasses.fields(Args):
        flag, kind = "--" + f.name.replace("_", "-"), str(f.type).replace(" ", "")
        if kind == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=docs[f.name])
            continue
        if kind == "list[str]":  # repeatable
            parser.add_argument(flag, action="append", default=None, help=docs[f.name], metavar="STR")
            continue
        optional, base = kind.endswith("|None"), scalars[kind.removesuffix("|None")]

        def convert(text: str, base: Any = base, optional: bool = optional) -> Any:
            return None if optional and text.lower() == "none" else base(text)

        convert.__name__ = base.__name__
        parser.add_argument(flag, type=convert, default=f.default, help=docs[f.name], metavar=base.__name__.upper())
    parsed = vars(parser.parse_args(argv))
    defaults = Args()
    for name, value in list(parsed.items()):  # an append flag not given: its default
        if value is None and isinstance(getattr(defaults, name), list):
            parsed[name] = list(getattr(defaults, name))
    args = Args(**parsed)
    if args.rl2_version not in VERSIONS:
        parser.error(f"--rl2-version must be one of {', '.join(VERSIONS)}, got {args.rl2_version!r}")
    if not 0.0 <= args.gamma <= 1.0:
        parser.error(f"--gamma must be in [0, 1], got {args.gamma}")
    from gem_core.errors import InvalidArgument
    from gem_core.rl.recipe_cli import parse_env_mix

    try:
        parse_env_mix(args.env_id)
    except InvalidArgument as exc:
        parser.error(str(exc))
    for name in ("train_seeds", "test_seeds", "max_turns", "max_tokens_per_turn", "prompts_per_rollout",
                 "max_length_per_device", "total_steps", "nproc_per_node", "tp_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args, extra


def installed_version() -> str | None:
    """``"head"`` or ``"0.0.2"`` for the importable RL2 (HEAD has ``RL2.datasets.SampleGroup``), else None."""
    import importlib.util

    spec = importlib.util.find_spec("RL2")
    if spec is None or not spec.submodule_search_locations:
        return None
    rl_py = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "rl.py"
    return "head" if "class SampleGroup" in rl_py.read_text(encoding="utf-8") else "0.0.2"


def write_dataset(path: Path, args: Args, seeds: range) -> int:
    """One JSONL row per seed: ``{"extra_info": {env_id, seed, settings}}``, the env id from
    the mixture (`gem_core.rl.recipe_cli.mix_rows`)."""
    from gem_core.rl.recipe_cli import mix_rows, parse_env_mix

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for env_id, seed in mix_rows(parse_env_mix(args.env_id), seeds):
            info = {"env_id": env_id, "seed": int(seed), "max_turns": args.max_turns}
            if args.system_prompt is not None:
                info["system_prompt"] = args.system_prompt
            f.write(json.dumps({"extra_info": info}) + "\n")
    return len(seeds)


def env_file() -> str:
    """The path of gem_rl2's env file (``rollout.env_path``)."""
    import gem_rl2.env

    return gem_rl2.env.__file__


def rl2_overrides(args: Args, version: str, train: Path, test: Path) -> list[str]:
    """The Hydra overrides of RL2's ``ppo`` config for this run and RL2 version."""
    common = [
        # ReBN: per-turn discounted returns normalised over the batch; no critic, no KL.
        "adv.estimator=rebn",
        f"adv.gamma={args.gamma}",
        "actor.kl.coef=0.0",
        # The policy.
        f"actor.model_name={args.model_path}",
        f"actor.max_length_per_device={args.max_length_per_device}",
        f"rollout.server_args.tp_size={args.tp_size}",
        # The env rows, played by gem_rl2's env file.
        f"rollout.env_path={env_file()}",
        f"trainer.project={args.project}",
        f"trainer.experiment_name={args.experiment_name}",
        f"trainer.use_wandb={str(args.use_wandb).lower()}",
    ]
    if version == "0.0.2":
        return [
            *common,
            f"actor.lr={args.lr}",
            f"train_data.path={train}",
            f"train_data.prompts_per_rollout={args.prompts_per_rollout}",
            "train_data.responses_per_prompt=1",
            f"test_data.path={test}",
            f"rollout.max_turns={args.max_turns}",
            f"rollout.train_sampling_params.max_new_tokens={args.max_tokens_per_turn}",
            f"rollout.train_sampling_params.temperature={args.temperature}",
            # gem_rl2.train also sets these (the env file needs the stop token in the text).
            "+rollout.train_sampling_params.skip_special_tokens=false",
            "+rollout.test_sampling_params.skip_special_tokens=false",
            "rollout.dynamic_filtering=false",
            "trainer.n_epochs=1",
        ]
    return [
        *common,
        f"actor.optimizer.lr={args.lr}",
        f"rollout.train.path={train}",
        f"rollout.train.prompts_per_rollout={args.prompts_per_rollout}",
        "rollout.train.responses_per_prompt=1",
        f"rollout.train.sampling_params.max_new_tokens={args.max_tokens_per_turn}",
        f"rollout.train.sampling_params.temperature={args.temperature}",
        "rollout.train.dynamic_filtering=false",
        "rollout.train.partial_rollout=false",
        f"rollout.test.path={test}",
        f"trainer.total_steps={args.total_steps}",
    ]


def validate(overrides: list[str], version: str, env_ids: list[str]) -> list[str]:
    """Compose RL2's shipped config with the overrides; returns problems."""
    problems: list[str] = []
    import gem_core

    for env_id in env_ids:
        try:
            gem_core.spec(env_id)
        except Exception as exc:  # unknown env id: "did you mean"
            problems.append(f"env: {exc}")
    try:
        import RL2
        from hydra import compose, initialize_config_dir
    except ImportError as exc:
        problems.append(f"RL2 is not importable ({exc}); install rl-square==0.0.2 or RL2 HEAD from source")
        return problems
    found = installed_version()
    if found != version:
        problems.append(f"the overrides are for RL2 {version} but the importable RL2 is {found}")
        return problems
    config_dir = os.path.join(os.path.dirname(RL2.__file__), "trainer", "config")
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose("ppo", overrides=overrides)
        if cfg.adv.estimator != "rebn" or not str(cfg.rollout.env_path).endswith("env.py"):
            problems.append("the composed config does not select rebn / gem_rl2's env file")
    except Exception as exc:
        problems.append(f"RL2's config rejects the overrides: {type(exc).__name__}: {exc}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    from gem_core.rl.recipe_cli import parse_env_mix, use_recipe_env_modules

    # Your env modules: imported here and, through the environment torchrun passes on, in
    # every rank.
    use_recipe_env_modules(args.env_module)

    # Prologue: where things go, which RL2.
    data_dir = Path(args.data_dir).resolve()
    train, test = data_dir / "train.jsonl", data_dir / "test.jsonl"
    version = args.rl2_version if args.rl2_version != "auto" else installed_version()
    if version is None:
        print("RL2 is not installed: install it (see the header) or pass --rl2-version 0.0.2|head", file=sys.stderr)
        return 2

    # 1. The dataset: env ids, seeds, episode settings.
    n_train = write_dataset(train, args, range(args.train_seeds))
    n_test = write_dataset(test, args, range(args.test_seed_offset, args.test_seed_offset + args.test_seeds))
    print(f"wrote {n_train} training rows to {train} and {n_test} test rows to {test} (RL2 {version})")

    # 2. RL2's PPO trainer with rebn, through gem_rl2's entry module.
    overrides = rl2_overrides(args, version, train, test)
    command = ["torchrun", f"--nproc_per_node={args.nproc_per_node}", "-m", "gem_rl2.train", *overrides, *extra]
    print("command:\n  " + " \\\n    ".join(shlex.quote(c) for c in command))
    if args.dry_run:
        problems = validate(overrides + extra, version, [e for e, _ in parse_env_mix(args.env_id)])
        for p in problems:
            print(f"problem: {p}", file=sys.stderr)
        print("dry run: " + ("the command is valid; not launched" if not problems else "fix the problems above"))
        return 1 if problems else 0
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
