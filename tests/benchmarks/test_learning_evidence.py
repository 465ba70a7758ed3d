"""benchmarks/learning_evidence.py's report: tables and figures from finished runs' files
(no recipe is run: the runs are written here as the recipe writes them)."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import learning_evidence as le  # noqa: E402

COLUMNS = ["iteration", "charts/success_rate", "charts/mean_turns", "eval/success_rate"]


def _write_run(out: Path, name: str, seed: int, success: list[float], turns: list[float], held_out: float) -> None:
    run = out / f"{name}__s{seed}"
    run.mkdir(parents=True)
    with (run / "metrics.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for i, (s, t) in enumerate(zip(success, turns, strict=True), start=1):
            w.writerow([i, s, t, held_out if i == len(success) else ""])
    ev = {"success_rate": held_out, "mean_turns": 3.0, "turns_to_solve": 2.5}
    summary = {
        "run_name": run.name, "args": {"env_id": "game:GuessTheNumber-v0-easy"}, "turn_budget": 10,
        "wall_time_s": 100.0 + seed, "eval": {"trained": ev, "untrained": ev, "random": ev, "oracle": ev},
    }  # fmt: skip
    (run / "summary.json").write_text(json.dumps(summary))


def test_the_report_covers_every_finished_run_and_reads_the_curves(tmp_path: Path) -> None:
    out = tmp_path / "tag"
    for seed in (1, 2):
        _write_run(out, "slack_rebn_g0.9", seed, [0.5] * 20 + [0.8] * 20, [6.0] * 20 + [5.0] * 20, 0.4 + 0.1 * seed)
    _write_run(out, "slack_rebn_g1.0", 1, [0.5] * 40, [6.5] * 40, 0.2)
    _write_run(out, "slack_rebn_g1.0", 10, [0.6] * 40, [6.0] * 40, 0.3)  # seed order is numeric: 1, 10
    results = le.collect_results(out, ["slack_rebn_g0.9", "slack_rebn_g1.0", "slack_ppo_g0.9"])
    assert sorted(results) == ["slack_rebn_g0.9", "slack_rebn_g1.0"]  # a config without runs is absent
    assert [r["run_name"] for r in results["slack_rebn_g1.0"]] == ["slack_rebn_g1.0__s1", "slack_rebn_g1.0__s10"]
    first = results["slack_rebn_g0.9"][0]
    assert first["curve"]["charts/success_rate"][-1] == 0.8 and math.isnan(first["curve"]["eval/success_rate"][0])
    # the sampled columns average the last LATE_ITERATIONS (20) iterations only
    assert le.late_training(first, "charts/success_rate") == pytest.approx(0.8)
    assert le.late_training(first, "charts/mean_turns") == pytest.approx(5.0)
    assert le.turns_with_budget(first) == pytest.approx(0.5 * 2.5 + 0.5 * 10)
    row = le.config_row("slack_rebn_g0.9", results["slack_rebn_g0.9"])
    assert row.startswith("| slack_rebn_g0.9 | 2 | 0.550 ± 0.071 | 0.50, 0.60 |")
    assert "| 0.800 ± 0.000 | 5.000 ± 0.000 |" in row
    assert row.count("|") == le.HEADER.split("\n")[0].count("|")


def test_one_figure_per_comparison_with_two_configurations(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "tag"
    _write_run(out, "slack_rebn_g0.9", 1, [0.5] * 30, [6.0] * 30, 0.5)
    _write_run(out, "slack_rebn_g1.0", 1, [0.4] * 30, [7.0] * 30, 0.3)
    _write_run(out, "rebn_g0.9", 1, [0.4] * 30, [3.0] * 30, 0.3)  # alone in its groups: no figure
    results = le.collect_results(out, list(le.CONFIGS))
    written = le.write_figures(tmp_path, "tag", results)
    assert set(written) == {"slack_gamma"}
    assert written["slack_gamma"].stat().st_size > 10_000


def test_smooth_and_band() -> None:
    assert le.smooth([1.0, 3.0, math.nan, 5.0], 2) == [1.0, 2.0, 3.0, 5.0]
    mean, lo, hi = le.band([[1.0, 2.0, 9.0], [3.0, 4.0]])  # up to the shortest run
    assert mean == [2.0, 3.0] and lo[0] == pytest.approx(2.0 - math.sqrt(2)) and hi[1] == pytest.approx(3.0 + math.sqrt(2))


def test_write_doc_replaces_only_the_marked_tables_and_copies_the_figures(tmp_path: Path) -> None:
    doc = tmp_path / "LEARNING.md"
    doc.write_text(
        "intro\n<!-- learning_evidence v9 slack_gamma -->\nold table\n<!-- /learning_evidence -->\nreading\n"
        "<!-- learning_evidence v8 slack_gamma -->\nother tag\n<!-- /learning_evidence -->\n"
    )
    figure = tmp_path / "v9-slack_gamma.png"
    figure.write_bytes(b"png")
    le.write_doc(doc, "v9", {"slack_gamma": "| new |", "negative": "| not in the doc |"}, {"slack_gamma": figure})
    assert doc.read_text() == (
        "intro\n<!-- learning_evidence v9 slack_gamma -->\n| new |\n<!-- /learning_evidence -->\nreading\n"
        "<!-- learning_evidence v8 slack_gamma -->\nother tag\n<!-- /learning_evidence -->\n"
    )
    assert (tmp_path / "figures" / "v9-slack_gamma.png").read_bytes() == b"png"
    doc.write_text("<!-- learning_evidence v9 negative -->\nno end marker\n")
    with pytest.raises(SystemExit, match="has no <!-- /learning_evidence --> after it"):
        le.write_doc(doc, "v9", {"negative": "| t |"}, {})
