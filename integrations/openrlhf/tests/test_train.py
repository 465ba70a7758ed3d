"""The entry module and the recipe: OpenRLHF's real parser and checks, gem-openrlhf's checks, the
trainer swap OpenRLHF's train() picks up, the real trainer class's pipeline, the recipe's dry run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)")

from gem_openrlhf import train  # noqa: E402
from openrlhf_harness import RECIPE, harness, load_recipe  # noqa: E402

from gem_core.errors import InvalidArgument  # noqa: E402


def _with(flags: list[str], flag: str, value: str | None) -> list[str]:
    """``flags`` with ``flag`` set to ``value`` (added if absent; a switch when ``value`` is None)."""
    out = list(flags)
    if flag in out:
        i = out.index(flag)
        del out[i : i + (1 if value is None or i + 1 >= len(out) or out[i + 1].startswith("--") else 2)]
    return out + ([flag] if value is None else [flag, value])


def test_the_recipes_flags_pass_openrlhfs_parser_and_checks():
    args = harness().args  # parsed by OpenRLHF's own parser (its __main__ block) and checked
    assert args.algo.advantage.estimator == "reinforce" and args.algo.advantage.gamma == 0.9
    assert args.train.agent_func_path == train.AGENT_FILE
    assert args.reward.remote_url == ["agent"]  # OpenRLHF's own post-parse step ran
    assert args.critic.model_name_or_path is None  # no critic for reinforce


def test_openrlhfs_parser_rejects_rebn_which_is_why_the_recipe_passes_reinforce(capsys):
    flags = _with(harness().flags, "--algo.advantage.estimator", "rebn")
    with pytest.raises(SystemExit) as exit_:
        train.parse_args(flags)
    assert exit_.value.code == 2
    assert "invalid choice: 'rebn'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--algo.advantage.estimator", "gae", "pass --algo.advantage.estimator reinforce (got 'gae')"),
        ("--algo.kl.init_coef", "0.01", "without --algo.kl.use_loss puts a KL penalty in the reward"),
        ("--reward.overlong_buffer_len", "16", "drop --reward.overlong_buffer_len"),
        ("--algo.advantage.no_std_norm", None, "drop --algo.advantage.no_std_norm"),
        ("--train.agent_func_path", "/nonexistent/agent.py", "is not a file; pass"),
    ],
)
def test_settings_rebn_cannot_honour_are_clear_errors(flag, value, message):
    with pytest.raises(InvalidArgument, match="gem-openrlhf cannot train with these flags") as err:
        train.parse_args(_with(harness().flags, flag, value))
    assert message in str(err.value)


def test_the_async_trainer_is_a_clear_error():
    flags = [f for f in harness().flags if f not in ("--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep")]
    with pytest.raises(InvalidArgument, match="drop --train.async_enable: OpenRLHF's async trainer"):
        train.parse_args(flags + ["--train.async_enable"])


def test_kl_as_a_loss_is_accepted():
    args = train.parse_args(_with(_with(harness().flags, "--algo.kl.init_coef", "0.01"), "--algo.kl.use_loss", None))
    assert args.algo.kl.use_loss and args.algo.kl.init_coef == 0.01


def test_install_makes_openrlhfs_train_import_the_gem_trainer():
    import openrlhf.trainer.ppo_trainer as ppo_trainer

    original = ppo_trainer.PPOTrainer
    try:
        installed = train.install()
        from openrlhf.trainer.ppo_trainer import PPOTrainer  # what train() executes

        assert PPOTrainer is installed
        assert issubclass(installed.__ray_actor_class__, original.__ray_actor_class__)
        assert installed.__ray_actor_class__.__module__ == "gem_openrlhf.trainer"  # Ray imports it by reference
    finally:
        ppo_trainer.PPOTrainer = original


def test_the_real_trainer_runs_the_gem_pipeline():
    from gem_openrlhf.experience import GemExperienceMaker, GemSamplesGenerator
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    t = harness().trainer  # GemPPOTrainerClass built with OpenRLHF's own __init__
    assert type(t.samples_generator) is GemSamplesGenerator and isinstance(t.samples_generator, SamplesGenerator)
    assert type(t.experience_maker) is GemExperienceMaker and isinstance(t.experience_maker, RemoteExperienceMaker)
    assert t.samples_generator.prompts_dataloader is t.prompts_dataloader
    assert t.experience_maker.kl_ctl is t.kl_ctl
    _, prompts, labels, _ = next(iter(t.prompts_dataloader))  # the recipe's dataset, read by OpenRLHF
    from gem_openrlhf.agent import parse_label

    assert parse_label(labels[0], prompt=prompts[0])["env_id"] == "game:GuessTheNumber-v0-easy"


def test_samples_from_another_agent_are_a_clear_error():
    h = harness()
    response = {"observation_tokens": [1, 2, 3], "action_ranges": [(2, 3)], "rollout_log_probs": None,
                "reward": 0.0, "scores": 0.0, "prompt": "p", "label": "l", "extra_logs": {}}
    with pytest.raises(InvalidArgument, match="has no 'gem_token_rewards'.*gem_openrlhf.agent"):
        h.experiences([response])


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, cwd="/")


def test_entry_module_dry_run_and_the_recipes_dry_run(tmp_path):
    h = harness()
    out = _run("-m", "gem_openrlhf.train", "--gem.dry_run", *h.flags)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "OpenRLHF's parser accepted the flags" in out.stdout

    out = _run(str(RECIPE), "--dry-run", "--data-dir", str(tmp_path), "--train-seeds", "3", "--eval-seeds", "2",
               "--gamma", "0.8", "--model-path", h.model_path, "--", "--ckpt.save_steps", "5")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "dry run: OpenRLHF's parser and gem-openrlhf's checks accept the command; not launched" in out.stdout
    for piece in ("-m gem_openrlhf.train", "--algo.advantage.gamma 0.8", f"--train.agent_func_path {train.AGENT_FILE}",
                  "--algo.advantage.estimator reinforce", "--ckpt.save_steps 5", "--vllm.num_engines 8"):
        assert piece in out.stdout, piece
    assert len((tmp_path / "train.jsonl").read_text().splitlines()) == 3
    assert len((tmp_path / "eval.jsonl").read_text().splitlines()) == 2



def test_the_recipes_dry_run_reports_problems(tmp_path, capsys):
    recipe = load_recipe()
    assert recipe.main(["--dry-run", "--data-dir", str(tmp_path), "--train-seeds", "1", "--eval-seeds", "0",
                        "--", "--train.async_enable"]) == 1
    assert "drop --train.async_enable" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        recipe.main(["--gamma", "1.5", "--data-dir", str(tmp_path)])
    assert exit_.value.code == 2 and "--gamma must be in [0, 1], got 1.5" in capsys.readouterr().err


def test_the_recipes_dry_run_with_a_users_env_module(tmp_path):
    """--env-module: the dry run knows the user's env (a module on no path); without it the id is
    refused with the fix. OpenRLHF's Ray cluster, started by the launched process, inherits the
    variables (`gem_core.use_env_modules`; tests/test_env_modules.py and the Ray tests of
    gem_core.distributed show the inheritance)."""
    from gem_core.testing.user_env import write_user_env_module

    mod = write_user_env_module(tmp_path / "user_code")
    common = (str(RECIPE), "--dry-run", "--data-dir", str(tmp_path / "data"), "--train-seeds", "1", "--eval-seeds", "0",
              "--model-path", harness().model_path, "--env-id", mod.env_id)
    out = _run(*common)
    assert out.returncode == 1 and f"no env registered with id '{mod.env_id}'" in out.stderr
    assert "--env-module" in out.stderr
    out = _run(*common, "--env-module", str(mod.path))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert json.loads((tmp_path / "data" / "train.jsonl").read_text().splitlines()[0])["label"]
