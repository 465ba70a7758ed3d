"""recipes/rl2_rebn.py --dry-run: the dataset rows and RL2's config accepting the overrides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("RL2", reason="gem-rl2's tests need rl-square (make test-rl2 builds its venv)")

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "rl2_rebn.py"


def test_dry_run_writes_rows_and_validates(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(RECIPE), "--dry-run", "--data-dir", str(tmp_path), "--train-seeds", "3",
         "--test-seeds", "2", "--system-prompt", "Play."],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "the command is valid" in proc.stdout and "gem_rl2.train" in proc.stdout and "torchrun" in proc.stdout
    assert "adv.estimator=rebn" in proc.stdout and "(RL2 0.0.2)" in proc.stdout
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert [r["extra_info"]["seed"] for r in rows] == [0, 1, 2]
    assert rows[0]["extra_info"] == {
        "env_id": "game:GuessTheNumber-v0-easy", "seed": 0, "max_turns": 8, "system_prompt": "Play."
    }


def test_unknown_env_is_a_problem(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(RECIPE), "--dry-run", "--data-dir", str(tmp_path), "--train-seeds", "1",
         "--test-seeds", "1", "--env-id", "game:GuessTheNumbr-v0"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1 and "problem: env:" in proc.stderr, proc.stderr[-2000:]


def test_a_users_env_module_is_checked_and_passed_to_the_ranks(tmp_path, monkeypatch):
    """--env-module: the dry run knows the user's env; the torchrun ranks inherit the
    variables (GEM_ENV_MODULES) from the recipe's process, and a rank's lookup finds the id."""
    import os

    from gem_core.testing.user_env import USER_ENV_REWARDS, write_user_env_module

    mod = write_user_env_module(tmp_path / "user_code")
    common = [sys.executable, str(RECIPE), "--dry-run", "--data-dir", str(tmp_path / "data"), "--train-seeds", "1",
              "--test-seeds", "1", "--env-id", mod.env_id]
    proc = subprocess.run(common, capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 1 and f"no env registered with id '{mod.env_id}'" in proc.stderr
    assert "--env-module" in proc.stderr
    proc = subprocess.run([*common, "--env-module", str(mod.path)], capture_output=True, text=True, timeout=300,
                          cwd="/")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # What a rank sees: the recipe's environment after --env-module (it runs torchrun with
    # it), handed to a fresh interpreter elsewhere that plays the env.
    import gem_core
    from gem_core.rl.recipe_cli import use_recipe_env_modules

    for var in ("GEM_ENV_MODULES", "PYTHONPATH"):  # set, then removed: monkeypatch restores them after
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setattr(sys, "path", list(sys.path))
    use_recipe_env_modules([str(mod.path)])
    rank_env = {**os.environ, "RANK": "1"}
    dict.pop(gem_core.registry, mod.env_id, None)
    rank = (
        "import gem_core\n"
        f"env = gem_core.make({mod.env_id!r}); env.reset(seed=0)\n"
        "print([env.step('x')[1] for _ in range(3)])\n"
    )
    out = subprocess.run([sys.executable, "-c", rank], capture_output=True, text=True, timeout=120, env=rank_env,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str(list(USER_ENV_REWARDS))


def test_a_multi_task_mixture_writes_rows_by_weight(tmp_path):
    """--env-id, repeated, each optionally ID=WEIGHT: the rows follow the weights, interleaved,
    and the dry run validates; a bad weight exits 2 before anything is written."""
    common = [sys.executable, str(RECIPE), "--dry-run", "--train-seeds", "8", "--test-seeds", "4"]
    proc = subprocess.run([*common, "--data-dir", str(tmp_path), "--env-id", "game:GuessTheNumber-v0-easy=3",
                           "--env-id", "toy:Echo-v0"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [json.loads(line)["extra_info"] for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in rows] == list(range(8))
    envs = [r["env_id"] for r in rows]
    assert envs.count("game:GuessTheNumber-v0-easy") == 6 and envs.count("toy:Echo-v0") == 2
    assert set(envs[:4]) == {"game:GuessTheNumber-v0-easy", "toy:Echo-v0"}  # interleaved
    proc = subprocess.run([*common, "--data-dir", str(tmp_path / "bad"), "--env-id", "toy:Echo-v0=x"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "the weight after '=' must be a number" in proc.stderr
    assert not (tmp_path / "bad").exists()
