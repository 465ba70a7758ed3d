"""``recipes/trl_rebn.py --model tiny`` end to end on a tiny budget: the summary and the curve it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="gem-trl's tests need TRL installed (make test-trl builds its venv)")

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "trl_rebn.py"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(RECIPE), *args], capture_output=True, text=True, timeout=300, cwd=str(cwd)
    )


def test_the_tiny_recipe_trains_and_writes_its_summary(tmp_path) -> None:
    out = _run(
        "--model", "tiny", "--output_dir", str(tmp_path), "--run_name", "smoke", "--max_steps", "2",
        "--per_device_train_batch_size", "8", "--num_generations", "4", "--format_warmup_steps", "2",
        "--warmup_episodes", "8", "--eval_episodes", "4", "--eval_every", "1", "--train_seeds", "16",
        "--threads", "1", "--disable_tqdm", "true", "--gamma", "0.8",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = tmp_path / "smoke"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2
    assert set(summary["eval"]) == {"random", "oracle", "untrained", "warmed_up", "trained"}
    assert summary["args"]["config"]["gamma"] == 0.8
    assert [e["step"] for e in summary["evals"]] == [1, 2]
    assert "gem/success_rate" in summary["final_train"] and summary["wall_time_s"] > 0
    assert (run / "learning_curve.png").stat().st_size > 1000
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum("gem/success_rate" in h for h in logged) == 2, "TRL's log history lacks the gem/ metrics"


def test_a_bad_history_is_refused(tmp_path) -> None:
    out = _run("--history", "none", "--output_dir", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2 and "--history must be one of summary, interval, chat, got 'none'" in out.stderr


def test_the_recipe_trains_on_any_env_including_a_users_own(tmp_path) -> None:
    """--env_id of an env that is not GuessTheNumber (here a user's own, a module on no path,
    named with --env_module): no warm-up, no oracle, TRL's train() runs and the summary is written."""
    from gem_core.testing.user_env import write_user_env_module

    mod = write_user_env_module(tmp_path / "user_code")
    common = ("--model", "tiny", "--output_dir", str(tmp_path), "--max_steps", "1", "--per_device_train_batch_size", "4",
              "--num_generations", "2", "--eval_episodes", "2", "--train_seeds", "4", "--threads", "1",
              "--disable_tqdm", "true", "--env_id", mod.env_id, "--truncated_response", "pass")
    out = _run(*common, "--run_name", "unknown", cwd=tmp_path)
    assert out.returncode != 0 and f"no env registered with id '{mod.env_id}'" in out.stderr + out.stdout
    out = _run(*common, "--run_name", "mine", "--env_module", str(mod.path), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    summary = json.loads((tmp_path / "mine" / "summary.json").read_text())
    assert summary["steps"] == 1 and set(summary["eval"]) == {"untrained", "trained"}
    assert "no format warm-up" in out.stdout
    # Every episode plays the env's three turns (any action): its returns are the env's.
    assert summary["eval"]["trained"]["mean_return"] == 6.0 and summary["eval"]["trained"]["mean_turns"] == 3.0


def test_a_multi_task_mixture_and_the_dry_run(tmp_path) -> None:
    """--env_id takes several ids, each optionally ID=WEIGHT: --dry_run makes and resets each,
    builds the training rows by weight and stops before any model; a bad weight exits 2; an
    unknown id is named."""
    common = ("--output_dir", str(tmp_path), "--train_seeds", "8", "--dry_run", "true")
    out = _run(*common, "--run_name", "mix", "--env_id", "game:GuessTheNumber-v0-easy=3", "toy:Echo-v0", cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "dry run: 8 training rows (game:GuessTheNumber-v0-easy: 6, toy:Echo-v0: 2)" in out.stdout
    assert "held-out evaluation on game:GuessTheNumber-v0-easy" in out.stdout and "not trained" in out.stdout
    assert "model tiny" not in out.stdout  # no model was built
    out = _run(*common, "--run_name", "bad", "--env_id", "toy:Echo-v0=x", cwd=tmp_path)
    assert out.returncode == 2 and "--env_id 'toy:Echo-v0=x': the weight after '=' must be a number" in out.stderr
    out = _run(*common, "--run_name", "typo", "--env_id", "toy:Echo-v0", "game:GuessTheNumbr-v0", cwd=tmp_path)
    assert out.returncode != 0 and "--env_id game:GuessTheNumbr-v0" in out.stderr + out.stdout
