"""Smoke test: the vector play demo (`make demo`) prints a summary row per env and policy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_play_prints_oracle_and_random_rows() -> None:
    cmd = [sys.executable, str(REPO / "recipes" / "demo_play.py"), "--pattern", "GuessTheNumber-v0-easy",
           "--episodes", "4", "--num-envs", "2"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    rows = {tuple(line.split()[:2]): line.split() for line in proc.stdout.splitlines()[1:]}
    oracle = rows[("game:GuessTheNumber-v0-easy", "oracle")]
    assert int(oracle[2]) >= 4 and float(oracle[3]) == 1.0  # the oracle always wins
    assert ("game:GuessTheNumber-v0-easy", "random") in rows


def test_demo_play_rejects_an_unknown_pattern() -> None:
    cmd = [sys.executable, str(REPO / "recipes" / "demo_play.py"), "--pattern", "NoSuchGame"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode != 0 and "no built-in env id contains" in proc.stderr
