"""gem_roll.config and recipes/roll_rebn.py: the YAML a ROLL run reads (no ROLL needed)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import yaml
from conftest import RECIPE
from gem_roll.config import (
    EXACT_PIPELINE,
    NATIVE_PIPELINE,
    STEP_ENV_MANAGER,
    roll_config,
    write_config,
)

from gem_core.errors import InvalidArgument, NameNotFound


def test_rebn_keys():
    c = roll_config(model="m", gamma=0.8)
    assert c["adv_estimator"] == "step_reinforce"
    assert c["step_reward_gamma"] == 0.8 and c["gamma"] == 1.0
    assert c["reward_normalization"] == {"grouping": "batch", "method": "mean_std"}
    assert c["pipeline_cls"] == EXACT_PIPELINE
    assert roll_config(model="m", exact=False)["pipeline_cls"] == NATIVE_PIPELINE
    (tag,) = c["custom_envs"]
    assert c["custom_envs"][tag]["env_manager_cls"] == STEP_ENV_MANAGER
    assert c["custom_envs"][tag]["env_type"] == "game:GuessTheNumber-v0-easy"
    assert c["train_env_manager"]["tags"] == [tag]


def test_mixture_splits_groups_by_weight():
    c = roll_config(model="m", envs={"game:GuessTheNumber-v0-easy": 1, "game:Sudoku-v0-easy": 3}, num_env_groups=8)
    assert c["train_env_manager"]["num_groups_partition"] == [2, 6]
    assert sum(c["train_env_manager"]["num_groups_partition"]) == c["train_env_manager"]["num_env_groups"]
    assert c["rollout_batch_size"] == 8


def test_yaml_round_trip(tmp_path):
    c = roll_config(model="m", max_turns=5, env_kwargs={"foo": 1})
    path = write_config(c, tmp_path / "x" / "run.yaml")
    back = yaml.safe_load(path.read_text())
    assert back == c
    (tag,) = back["custom_envs"]
    assert back["custom_envs"][tag]["env_config"] == {"max_turns": 5, "foo": 1}
    assert back["custom_envs"][tag]["max_steps"] == 5


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"gamma": 1.5}, InvalidArgument, "gamma must be a number in"),
        ({"gamma": True}, InvalidArgument, "gamma must be a number in"),
        ({"envs": ["game:GuessTheNumbr-v0-easy"]}, NameNotFound, "GuessTheNumber"),
        ({"envs": []}, InvalidArgument, "at least one"),
        ({"envs": {"game:GuessTheNumber-v0-easy": 0}}, InvalidArgument, "finite number > 0"),
        ({"num_env_groups": 0}, InvalidArgument, "num_env_groups must be an int"),
        ({"envs": ["game:GuessTheNumber-v0-easy", "game:Sudoku-v0-easy"], "num_env_groups": 1}, InvalidArgument, ">= the number of envs"),
        ({"max_tokens_per_step": 4096, "sequence_length": 4096}, InvalidArgument, "must be < sequence_length"),
        ({"env_manager_cls": "NoDots"}, InvalidArgument, "dotted path"),
        ({"max_turns": 0}, InvalidArgument, "max_turns must be an int"),
    ],
)
def test_bad_input_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        roll_config(model="m", **kwargs)


def test_write_config_needs_yaml_suffix(tmp_path):
    with pytest.raises(InvalidArgument, match=r"\.yaml"):
        write_config({}, tmp_path / "run.yml")


def _recipe():
    spec = importlib.util.spec_from_file_location("roll_rebn_recipe", RECIPE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_recipe_dry_run_writes_the_yaml(tmp_path):
    out = subprocess.run(
        [sys.executable, str(RECIPE), "--dry-run", "--out", str(tmp_path), "--roll-src", "",
         "--env", "game:GuessTheNumber-v0-easy=1", "--env", "game:Sudoku-v0-easy=1", "--num-env-groups", "4"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    c = yaml.safe_load((tmp_path / "roll_rebn.yaml").read_text())
    assert c["train_env_manager"]["num_groups_partition"] == [2, 2]
    assert c["pipeline_cls"] == EXACT_PIPELINE


def test_recipe_launch_command_is_relative_to_the_launcher(tmp_path):
    mod = _recipe()
    roll = tmp_path / "ROLL"
    (roll / "examples").mkdir(parents=True)
    (roll / "examples" / "start_agentic_pipeline.py").write_text("")
    cmd = mod.launch_command(str(roll), tmp_path / "runs" / "a.yaml")
    assert cmd[-4:] == ["--config_path", "../../runs", "--config_name", "a"]
    with pytest.raises(InvalidArgument, match="no ROLL launcher"):
        mod.launch_command(str(tmp_path / "nowhere"), tmp_path / "a.yaml")
    with pytest.raises(InvalidArgument, match="weight after"):
        mod.parse_envs(["game:GuessTheNumber-v0-easy=x"])


def test_recipe_with_a_users_env_module(tmp_path):
    """--env-module: the recipe knows the user's env (a module on no path) and the launcher,
    which ROLL's env workers' Ray cluster starts from, inherits the variables; without it the
    id is refused with the fix before anything is written."""
    from gem_core.testing.user_env import write_user_env_module

    mod = write_user_env_module(tmp_path / "user_code")
    common = [sys.executable, str(RECIPE), "--dry-run", "--out", str(tmp_path / "run"), "--roll-src", "",
              "--env", f"{mod.env_id}=1", "--num-env-groups", "2"]
    out = subprocess.run(common, capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode != 0 and f"no env registered with id '{mod.env_id}'" in out.stderr
    assert "--env-module" in out.stderr and not (tmp_path / "run" / "roll_rebn.yaml").exists()
    out = subprocess.run([*common, "--env-module", str(mod.path)], capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    c = yaml.safe_load((tmp_path / "run" / "roll_rebn.yaml").read_text())
    assert mod.env_id in yaml.safe_dump(c)


def test_recipe_refuses_a_bad_mixture_with_exit_2(tmp_path, capsys):
    """--env given twice, or with weights all 0, stops before anything is written."""
    mod = _recipe()
    out = tmp_path / "out"
    assert mod.main(["--env", "toy:Echo-v0", "--env", "toy:Echo-v0=2", "--out", str(out), "--dry-run"]) == 2
    assert "'toy:Echo-v0' is given twice" in capsys.readouterr().err
    assert mod.main(["--env", "toy:Echo-v0=0", "--out", str(out), "--dry-run"]) == 2
    assert "the weights are all 0" in capsys.readouterr().err
    assert not out.exists()
