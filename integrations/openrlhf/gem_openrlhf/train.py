r"""Entry module: ``python -m gem_openrlhf.train <OpenRLHF's own train_ppo_ray flags>``.

It installs `gem_openrlhf.trainer.GemPPOTrainer` as ``openrlhf.trainer.ppo_trainer.PPOTrainer``
(OpenRLHF's ``train()`` imports ``PPOTrainer`` inside the function, so the swap takes
effect), then runs OpenRLHF's own CLI module ``openrlhf.cli.train_ppo_ray`` as
``__main__`` (its parser and checks live in that block). Every flag is OpenRLHF's; the
settings gem-openrlhf needs are checked right after OpenRLHF parses them
(`check_args`):

- ``--train.agent_func_path`` names an agent file (`AGENT_FILE`, gem_openrlhf's);
- ``--algo.advantage.estimator reinforce``: OpenRLHF's argparse has no ``rebn`` choice;
  the override replaces the whole advantage step with per-turn ReBN, discounted with
  ``--algo.advantage.gamma``;
- the KL penalty as a loss (``--algo.kl.use_loss``) or none (``--algo.kl.init_coef 0``):
  ReBN's returns are the env's rewards, a KL *reward* penalty would be dropped;
- no length penalties (``--reward.overlong_buffer_len``,
  ``--reward.stop_properly_penalty_coef``) and no ``--algo.advantage.no_std_norm``:
  ReBN would silently ignore them;
- not ``--train.async_enable``: the async trainer builds its samples generator and
  experience maker in its own Ray actors, which this override does not reach yet.

``python -m gem_openrlhf.train --gem.dry_run ...`` (or `parse_args`) parses and checks the
flags with OpenRLHF's real parser and stops before training.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import runpy
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = ["AGENT_FILE", "OPENRLHF_CLI", "check_args", "install", "main", "parse_args"]

#: OpenRLHF's CLI module this entry module runs.
OPENRLHF_CLI = "openrlhf.cli.train_ppo_ray"
#: The agent file to pass as ``--train.agent_func_path``.
AGENT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent.py")
#: The flag (of this module, removed before OpenRLHF parses) that stops after the checks.
DRY_RUN_FLAG = "--gem.dry_run"


def check_args(args: Any) -> Any:
    """Check OpenRLHF's parsed (hierarchical) args for what gem-openrlhf needs (module docs).

    Raises:
        InvalidArgument: a setting gem-openrlhf cannot honour, with the flag to change.
    """
    problems = []
    agent = args.train.agent_func_path
    if not agent:
        problems.append(f"pass --train.agent_func_path {AGENT_FILE} (gem_openrlhf's agent executor)")
    elif not os.path.isfile(agent):
        problems.append(f"--train.agent_func_path {agent!r} is not a file; pass {AGENT_FILE}")
    if args.algo.advantage.estimator != "reinforce":
        problems.append(
            f"pass --algo.advantage.estimator reinforce (got {args.algo.advantage.estimator!r}): "
            "gem-openrlhf replaces OpenRLHF's advantage step with per-turn ReBN and OpenRLHF's "
            "parser has no 'rebn' choice"
        )
    if args.algo.kl.init_coef > 0 and not args.algo.kl.use_loss:
        problems.append(
            f"--algo.kl.init_coef {args.algo.kl.init_coef} without --algo.kl.use_loss puts a KL penalty "
            "in the reward, which ReBN (env rewards only) would drop: add --algo.kl.use_loss, or pass "
            "--algo.kl.init_coef 0"
        )
    for flag, value in (
        ("--reward.overlong_buffer_len", args.reward.overlong_buffer_len),
        ("--reward.stop_properly_penalty_coef", args.reward.stop_properly_penalty_coef),
    ):
        if value is not None:
            problems.append(f"drop {flag} ({value}): ReBN sees the env's per-turn rewards only")
    if args.algo.advantage.no_std_norm:
        problems.append("drop --algo.advantage.no_std_norm: ReBN always divides by the std of the returns")
    if args.train.async_enable:
        problems.append(
            "drop --train.async_enable: OpenRLHF's async trainer builds its samples generator and "
            "experience maker in its own Ray actors, which gem-openrlhf's ReBN override does not reach"
        )
    if problems:
        raise InvalidArgument("gem-openrlhf cannot train with these flags:\n  - " + "\n  - ".join(problems))
    return args


class _Parsed(Exception):
    pass


def check_trainer_swap() -> None:
    """Raise ImportError, naming the change, unless OpenRLHF's ``train()`` still imports
    ``PPOTrainer`` from ``openrlhf.trainer.ppo_trainer`` when it runs (what lets `install`
    swap the class): bound at the CLI module's import instead, the swap would be silently
    ignored and OpenRLHF's own advantages would train."""
    import importlib

    from gem_openrlhf._version import OPENRLHF_MIN

    cli = importlib.import_module(OPENRLHF_CLI)
    train = getattr(cli, "train", None)
    names = getattr(getattr(train, "__code__", None), "co_names", ())
    if "PPOTrainer" in vars(cli) or "openrlhf.trainer.ppo_trainer" not in names or "PPOTrainer" not in names:
        raise ImportError(
            f"OpenRLHF changed {OPENRLHF_CLI}.train: it no longer imports PPOTrainer from "
            "openrlhf.trainer.ppo_trainer inside the function, so gem-openrlhf's trainer swap would not "
            f"reach it (tested with openrlhf {OPENRLHF_MIN}); use the tested OpenRLHF or an updated gem-openrlhf"
        )


def install() -> Any:
    """Install `gem_openrlhf.trainer.GemPPOTrainer` as ``openrlhf.trainer.ppo_trainer.PPOTrainer``
    (after `check_trainer_swap`)."""
    import openrlhf.trainer.ppo_trainer as ppo_trainer

    from gem_openrlhf.trainer import GemPPOTrainer

    check_trainer_swap()
    ppo_trainer.PPOTrainer = GemPPOTrainer
    return GemPPOTrainer


@contextlib.contextmanager
def _openrlhf_cli(argv: Sequence[str], on_args: Callable[[Any], Any], *, stop: bool) -> Iterator[list[Any]]:
    """OpenRLHF's CLI with ``on_args`` run on the parsed args; with ``stop``, ``train()`` is not entered."""
    import openrlhf.utils.config as config
    import ray

    parsed: list[Any] = []
    real_hierarchize, real_is_initialized, real_argv = config.hierarchize, ray.is_initialized, sys.argv

    def hierarchize(namespace: Any) -> Any:
        args = real_hierarchize(namespace)
        parsed.append(on_args(args))
        return args

    def is_initialized() -> bool:  # the first call of OpenRLHF's train(args)
        raise _Parsed

    config.hierarchize = hierarchize
    if stop:
        ray.is_initialized = is_initialized
    sys.argv = [OPENRLHF_CLI, *argv]
    try:
        yield parsed
    except _Parsed:
        pass
    finally:
        config.hierarchize, ray.is_initialized, sys.argv = real_hierarchize, real_is_initialized, real_argv


def _stub_missing_imports() -> list[str]:
    from gem_openrlhf.testing import install_import_stubs

    return install_import_stubs()


def parse_args(argv: Sequence[str], *, stub_missing_imports: bool = False) -> Any:
    """OpenRLHF's real parser and checks on ``argv``, then `check_args`; nothing is trained.

    Args:
        argv: the flags of ``python -m openrlhf.cli.train_ppo_ray``.
        stub_missing_imports: where ``vllm`` / ``flash_attn`` are not installed (a CPU
            machine), put import stand-ins in their place so OpenRLHF's CLI module imports
            (`gem_openrlhf.testing.install_import_stubs`; parsing uses none of them).

    Returns:
        OpenRLHF's hierarchical args.

    Raises:
        SystemExit: OpenRLHF's parser rejected a flag (code 2, its message on stderr).
        AssertionError: one of OpenRLHF's own post-parse checks failed.
        InvalidArgument: `check_args` failed.
    """
    if stub_missing_imports:
        _stub_missing_imports()
    if "vllm" not in sys.modules and importlib.util.find_spec("vllm") is None:
        raise ModuleNotFoundError(
            "OpenRLHF's CLI imports vllm, which is not installed; install openrlhf[vllm] on the "
            "GPU machine, or parse with stub_missing_imports=True on a CPU machine"
        )
    with _openrlhf_cli(list(argv), check_args, stop=True) as parsed:
        runpy.run_module(OPENRLHF_CLI, run_name="__main__", alter_sys=False)
    if not parsed:
        raise RuntimeError(f"{OPENRLHF_CLI} did not parse its arguments (an unsupported OpenRLHF version?)")
    return parsed[0]


def main(argv: Sequence[str] | None = None) -> None:
    """Run OpenRLHF's ``train_ppo_ray`` with `GemPPOTrainer` installed (see the module docs)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    dry_run = DRY_RUN_FLAG in argv
    argv = [a for a in argv if a != DRY_RUN_FLAG]
    try:
        if dry_run:
            args = parse_args(argv, stub_missing_imports=True)
            print(f"gem-openrlhf: OpenRLHF's parser accepted the flags (estimator {args.algo.advantage.estimator}"
                  f" -> per-turn ReBN, gamma {args.algo.advantage.gamma}); dry run, not training")
            return
        install()
        with _openrlhf_cli(argv, check_args, stop=False):
            runpy.run_module(OPENRLHF_CLI, run_name="__main__", alter_sys=False)
    except InvalidArgument as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
