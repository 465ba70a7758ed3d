"""benchmarks/learning_trl.py: its table and figure from run summaries written as the TRL recipe writes them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import learning_trl  # noqa: E402


def _summary(success: float, steps: int, wall: float, reached_at: float | None) -> dict:
    metrics = {"success_rate": success, "mean_turns": 2.9, "turns_to_solve": 2.8}
    evals = [{"step": 25 * (i + 1), "time_s": wall * (i + 1) / 4, "success_rate": success * (i + 1) / 4} for i in range(4)]
    return {
        "eval": {"trained": metrics, "warmed_up": {"success_rate": 0.1}, "random": {"success_rate": 0.31}, "oracle": {"success_rate": 1.0}},
        "evals": evals,
        "steps": steps,
        "wall_time_s": wall,
        "time_to_target_s": reached_at,
    }


def test_table_says_which_seeds_reached_the_target() -> None:
    rows = [(1, _summary(1.0, 275, 678.0, 676.0)), (2, _summary(0.87, 385, 902.0, None))]
    text = learning_trl.table(rows, 0.9)
    lines = text.splitlines()
    assert lines[2] == "| 1 | 1.000 | yes | 275 | 676 | 678 | 2.90 | 2.80 |"
    assert lines[3] == "| 2 | 0.870 | no | 385 | – | 902 | 2.90 | 2.80 |"
    assert "random policy 0.310" in text and "warmed-up model 0.100, 0.100" in text


def test_main_reuses_finished_seeds_and_draws_the_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(learning_trl, "RESULTS", tmp_path)
    for seed, summary in ((1, _summary(1.0, 275, 678.0, 676.0)), (4, _summary(0.785, 420, 762.0, None))):
        run = tmp_path / "trl-t" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps(summary))
    monkeypatch.setattr(learning_trl.subprocess, "run", lambda *a, **k: pytest.fail("a finished seed was rerun"))
    copy = tmp_path / "figures" / "trl-t.png"
    learning_trl.main(["--seeds", "1", "4", "--tag", "t", "--figure", str(copy)])
    assert "| 4 | 0.785 | no | 420 |" in (tmp_path / "trl-t.md").read_text()
    png = (tmp_path / "trl-t.png").read_bytes()
    assert png.startswith(b"\x89PNG") and copy.read_bytes() == png
