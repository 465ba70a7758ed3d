# Launch on one GPU node, Python 3.10 (from the clone; oat-llm 0.2.4 brings vLLM 0.8.4 and its torch):
#
#     pip install -e . -e integrations/oat && pip install openai dm-tree
#
#     python recipes/oat_rebn.py --pretrain Qwen/Qwen3-1.7B-Base --gpus 8 --collocate \
#         --env_ids game:GuessTheNumber-v0-easy --max_turns 4 \
#         --gamma 0.9 --whiten_adv --critic_type drgrpo --beta 0 \
#         --num_samples 1 --train_batch_size_per_device 1 --buffer_clear_every 1 \
#         --rollout_batch_size 128 --rollout_batch_size_per_device 16 --max_train 64000 \
#         --generate_max_length 256 --prompt_max_length 1024 --max_response_length 3072 \
#         --max_model_len 4096 --learning_rate 1e-6 --lr_scheduler constant --zero_stage 2 \
#         --save_path ./oat-output
#
# A mixture: `--env_ids game:GuessTheNumber-v0-easy toy:Echo-v0 --env_weights 3 1`; env kwargs:
# `--env_kwargs '{"game:GuessTheNumber-v0-easy": {"max_turns": 6}}'`. Every oat PPOArgs option is
# a flag (`--help`); the GEM ones are documented in gem_oat.args.GemArgs. The PPO-clip path is used:
# oat 0.2.4's `--reinforce_update` ends each learning step in ZeroDivisionError (refused up front).
# Check the arguments and envs without launching: `--dry-run` (needs oat importable, not a GPU).
"""Multi-turn PPO with ReBN advantages in oat, on GEM envs (one file, oat-style).

oat's distributed program (launchpad: an IPC server, vLLM actors, DeepSpeed learners)
with GEM's adapter (`gem_oat`):

1. **Actors** (`gem_oat.GemActor`, oat's ``PPOMultiTurnActor``): each learner step, each
   actor plays ``rollout_batch_size_per_device`` gem_core episodes (env ids drawn from the
   mixture) with oat's vLLM engine, the turns of concurrent episodes batched into one
   engine call, and returns one oat ``Transition`` per generated turn (that turn's
   reward, the whole token-exact context as its prompt, the sampled ids and log-probs).
2. **Learners** (`gem_oat.GemLearner`, oat's ``PPOMultiTurnLearner``): oat computes each
   transition's discounted return (``--gamma``, no critic) and, with ``--whiten_adv``,
   normalises the returns over every transition of every rank: that is **ReBN**. GemLearner
   keeps every transition of the step (oat alone keeps a random subset of
   ``rollout_batch_size_per_device`` before whitening), then oat's PPO-clip update runs.

Everything is checked before any GPU work (`gem_oat.validate_args` makes every env once).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def gem_options_help(reason: str) -> str:
    """GemArgs' own options with their docs, read from gem_oat/args.py's source (oat's
    ``PPOArgs``, their base, cannot be imported without oat's runtime)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("gem_oat")
    if spec is None or not spec.submodule_search_locations:
        return f"gem-oat is not installed ({reason}): pip install -e integrations/oat"
    source = Path(list(spec.submodule_search_locations)[0], "args.py").read_text()
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "GemArgs")
    lines = [(__doc__ or "").split("\n\n")[0], "",
             f"oat's own options (every PPOArgs field) need oat's runtime to list ({reason}); gem-oat's:"]
    body = cls.body
    for node, nxt in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr) \
                and isinstance(nxt.value, ast.Constant):
            lines.append(f"  --{node.target.id} {ast.unparse(node.annotation)}: {' '.join(str(nxt.value.value).split())}")
    return "\n".join(lines)


DRY_RUN_FLAG = "--dry-run"
"""The recipe's own flag (removed before oat parses): check everything, print the plan, do not launch."""


def main() -> None:
    dry_run = DRY_RUN_FLAG in sys.argv[1:]
    if dry_run:
        sys.argv = [a for a in sys.argv if a != DRY_RUN_FLAG]
    try:
        from gem_oat import GemArgs, check_oat_version, validate_args
        from oat.args import default_args_validation, get_default_args
    except ImportError as exc:  # oat imports launchpad and vLLM at import
        if any(a in ("-h", "--help") for a in sys.argv[1:]):
            print(gem_options_help(str(exc)))
            raise SystemExit(0) from None
        raise SystemExit(
            f"oat_rebn.py: oat cannot be imported ({exc}); on a Python 3.10 GPU machine install its "
            "runtime as integrations/oat/README.md (Install) says"
        ) from None

    # ---- prologue: arguments, checks (no GPU touched yet; --help needs no launchpad) -----
    check_oat_version()
    args: GemArgs = get_default_args(GemArgs)
    args.algo = "PPO"
    validate_args(args)  # env modules, env ids, kwargs, wrappers (each env made once), oat's limits
    if dry_run:  # oat's own checks run; only its GPU count is taken as the launch machine's
        from unittest import mock

        with mock.patch("torch.cuda.device_count", return_value=args.gpus):
            args = default_args_validation(args)
    else:
        args = default_args_validation(args)
    logging.getLogger().setLevel(logging.INFO)
    logging.info("gem-oat: envs %s (weights %s), gamma %s", args.env_ids, args.env_weights or "uniform", args.gamma)
    if dry_run:
        weights = args.env_weights or [1.0] * len(args.env_ids)
        print(f"dry run: envs {', '.join(f'{e} (weight {w:g})' for e, w in zip(args.env_ids, weights, strict=True))}; "
              f"gamma {args.gamma:g}, whiten_adv {args.whiten_adv}; gem-oat's and oat's checks pass (the GPU count "
              f"is not checked here: --gpus {args.gpus}); not launched")
        return

    # ---- the oat program: actors play GEM envs, learners run oat's ReBN PPO -----------
    try:  # the runtime: launchpad and vLLM (oat's actors import it), GPU machines only
        import launchpad as lp
        from gem_oat import GemActor, GemLearner
        from oat.interface import get_program
    except ImportError as exc:
        raise SystemExit(
            f"oat_rebn.py: launching needs oat's runtime ({exc}); on a Python 3.10 GPU machine "
            "install it as integrations/oat/README.md (Install) says"
        ) from None
    program, local_resources = get_program(args, learner_cls=GemLearner, actor_cls=GemActor)
    lp.launch(program, launch_type=args.launch_type, local_resources=local_resources, terminal="current_terminal")


if __name__ == "__main__":
    main()
