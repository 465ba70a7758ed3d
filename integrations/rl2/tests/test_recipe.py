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
