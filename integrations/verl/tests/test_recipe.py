"""``recipes/verl_rebn.py --dry-run``: writes the env dataset, validates and prints the command."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gem_core.rl.recipe_cli import field_docs

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "verl_rebn.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(RECIPE), *args], capture_output=True, text=True, timeout=300, cwd="/",
        env={**os.environ, "COLUMNS": "200"},  # tyro wraps its help and errors to the terminal width
    )  # fmt: skip


def _recipe_args() -> tuple[type, dict[str, str]]:
    """The recipe's `Args` and its field docstrings."""
    spec = importlib.util.spec_from_file_location("verl_rebn_recipe", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and inspect look their module up
    try:
        spec.loader.exec_module(module)
        return module.Args, field_docs(module.Args)
    finally:
        del sys.modules[spec.name]


def test_dry_run_writes_the_dataset_and_a_valid_command(tmp_path, verl_config, tiny_model_path):
    out = _run(
        "--dry-run", "--data-dir", str(tmp_path), "--train-seeds", "6", "--val-seeds", "2",
        "--gamma", "0.8", "--model-path", tiny_model_path, "--max-turns", "3",
        "--", "trainer.total_training_steps=2",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "dry run: the command is valid; not launched" in out.stdout
    for piece in ("verl.trainer.main_ppo", "algorithm.adv_estimator=rebn", "algorithm.gamma=0.8",
                  "actor_rollout_ref.rollout.agent.default_agent_loop=gem_agent",
                  f"actor_rollout_ref.model.path={tiny_model_path}", "trainer.n_gpus_per_node=8",
                  "trainer.total_training_steps=2"):
        assert piece in out.stdout, piece

    # verl's own dataset class reads the rows the agent loop needs.
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tok = AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)
    data_cfg = OmegaConf.merge(verl_config.data, {"filter_overlong_prompts": False})
    ds = RLHFDataset(data_files=[str(tmp_path / "train.parquet")], tokenizer=tok, config=data_cfg)
    assert len(ds) == 6
    rows = [ds[i] for i in range(6)]
    assert [r["seed"] for r in rows] == list(range(6))
    assert {r["env_id"] for r in rows} == {"game:GuessTheNumber-v0-easy"}
    assert {r["agent_name"] for r in rows} == {"gem_agent"}
    assert rows[0]["raw_prompt"][0]["role"] == "user"
    val = RLHFDataset(data_files=[str(tmp_path / "val.parquet")], tokenizer=tok, config=data_cfg)
    assert [val[i]["seed"] for i in range(2)] == [1_000_000, 1_000_001]

    (entry,) = json.loads((tmp_path / "agent_loop.yaml").read_text())
    assert entry["_target_"] == "gem_verl.agent_loop.GemAgentLoop" and entry["max_turns"] == 3
    assert OmegaConf.load(tmp_path / "agent_loop.yaml")[0].name == "gem_agent"


def test_dry_run_reports_a_bad_override(tmp_path):
    out = _run("--dry-run", "--data-dir", str(tmp_path), "--train-seeds", "2", "--val-seeds", "1",
               "--", "trainer.no_such_key=1")
    assert out.returncode == 1
    assert "verl's config rejects the overrides" in out.stderr
    assert "fix the problems above" in out.stdout


def test_argument_errors_say_what_was_expected(tmp_path):
    out = _run("--gamma", "1.5", "--data-dir", str(tmp_path))
    assert out.returncode == 2 and "--gamma must be in [0, 1], got 1.5" in out.stderr
    out = _run("--ppo-mini-batch-size", "256", "--train-batch-size", "128", "--data-dir", str(tmp_path))
    assert out.returncode == 2 and "must not exceed --train-batch-size (128)" in out.stderr


def test_help_shows_every_field_with_its_docstring():
    out = _run("--help")
    assert out.returncode == 0, out.stderr[-2000:]
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out.stdout).split())  # tyro's boxes and wrapping away
    assert "Multi-turn REINFORCE + ReBN on GEM envs with verl" in flat
    args, docs = _recipe_args()
    for field in dataclasses.fields(args):
        assert "--" + field.name.replace("_", "-") in flat
        assert docs.get(field.name), f"Args.{field.name} has no docstring"
        assert " ".join(docs[field.name].split()[:6]) in flat, field.name


def test_bad_option_values_are_rejected_by_the_parser(tmp_path):
    out = _run("--rollout-name", "trtllm", "--data-dir", str(tmp_path))
    assert out.returncode == 2 and "invalid choice 'trtllm' for argument '--rollout-name'" in out.stderr
    out = _run("--train-seeds", "many", "--data-dir", str(tmp_path))
    assert out.returncode == 2 and "--train-seeds" in out.stderr
    assert not (tmp_path / "train.parquet").exists()  # nothing written before the arguments are checked


def test_dry_run_with_a_users_env_module(tmp_path):
    """--env-module makes a user's env (a module on no path) known to the dry run's checks and
    puts the variables into verl's Ray runtime_env; without it the id is refused with the fix."""
    from gem_core.testing.user_env import write_user_env_module

    mod = write_user_env_module(tmp_path / "user_code")
    common = ("--dry-run", "--data-dir", str(tmp_path / "data"), "--train-seeds", "2", "--val-seeds", "1",
              "--env-id", mod.env_id)
    out = _run(*common)
    assert out.returncode == 1 and f"no env registered with id '{mod.env_id}'" in out.stderr
    assert "--env-module" in out.stderr
    out = _run(*common, "--env-module", str(mod.path))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "dry run: the command is valid; not launched" in out.stdout  # verl's config took the override
    import shlex

    assert shlex.quote(f"+ray_kwargs.ray_init.runtime_env.env_vars.GEM_ENV_MODULES='{mod.path}'") in out.stdout
    out = _run(*common, "--env-module", "no_such_env_module_xyz")
    assert out.returncode == 2 and "--env-module: env module 'no_such_env_module_xyz' cannot be imported" in out.stderr


def test_a_multi_task_mixture_writes_rows_by_weight(tmp_path):
    """--env-id takes several ids, each optionally ID=WEIGHT: the rows follow the weights,
    interleaved, and every id is checked; a bad weight stops before anything is written."""
    import pandas as pd

    out = _run("--dry-run", "--data-dir", str(tmp_path), "--train-seeds", "8", "--val-seeds", "4",
               "--env-id", "game:GuessTheNumber-v0-easy=3", "toy:Echo-v0")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    train = pd.read_parquet(tmp_path / "train.parquet")
    assert list(train["seed"]) == list(range(8))
    assert train["env_id"].value_counts().to_dict() == {"game:GuessTheNumber-v0-easy": 6, "toy:Echo-v0": 2}
    assert set(train["env_id"][:4]) == {"game:GuessTheNumber-v0-easy", "toy:Echo-v0"}  # interleaved
    assert list(train["data_source"]) == [f"gem:{e}" for e in train["env_id"]]
    val = pd.read_parquet(tmp_path / "val.parquet")
    assert val["env_id"].value_counts().to_dict() == {"game:GuessTheNumber-v0-easy": 3, "toy:Echo-v0": 1}
    out = _run("--dry-run", "--data-dir", str(tmp_path / "bad"), "--env-id", "game:GuessTheNumber-v0-easy",
               "toy:Echo-v0=-1")
    assert out.returncode == 2 and "--env-id 'toy:Echo-v0=-1': the weight must be finite and >= 0" in out.stderr
    assert not (tmp_path / "bad").exists()
    out = _run("--dry-run", "--data-dir", str(tmp_path / "typo"), "--env-id", "toy:Echo-v0", "game:GuessTheNumbr-v0")
    assert out.returncode == 1 and "env: " in out.stderr and "GuessTheNumbr" in out.stderr
