"""Smoke test: `recipes/cpu_reinforce_rebn.py` trains for two tiny iterations in a subprocess."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the CPU recipe needs gem-core[rl] (torch)")
pytest.importorskip("transformers", reason="the CPU recipe needs gem-core[rl] (transformers)")

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "cpu_reinforce_rebn.py"

EXPECTED_COLUMNS = [
    "iteration",
    "episodes",
    "time_s",
    "charts/success_rate",
    "charts/mean_turns",
    "charts/turns_to_solve",
    "charts/mean_return",
    "charts/format_error_rate",
    "charts/truncated_rate",
    "charts/invalid_rate",
    "charts/error_episodes",
    "charts/learning_rate",
    "losses/loss",
    "losses/kl_to_warmup",
    "losses/entropy",
    "losses/logprob_mismatch",
    "losses/grad_norm",
    "losses/adv_abs_mean",
    "eval/success_rate",
    "eval/turns_to_solve",
]
# Columns that must hold a finite number on every row (turns_to_solve is empty when no
# episode of the batch succeeded; eval/* only on evaluation rows).
ALWAYS_FINITE = [
    c for c in EXPECTED_COLUMNS if c not in ("charts/turns_to_solve", "eval/success_rate", "eval/turns_to_solve")
]


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, str(RECIPE),
        "--iterations", "2", "--episodes-per-iter", "8", "--group-size", "4",
        "--warmup-steps", "5", "--warmup-episodes", "16", "--warmup-batch-size", "8",
        "--eval-episodes", "8", "--output-dir", str(tmp_path), "--run-name", "smoke",
        "--no-progress", *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=REPO)


@pytest.mark.timeout(300)
def test_recipe_runs_and_writes_metrics(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert proc.returncode == 0, f"recipe failed:\n{proc.stdout}\n{proc.stderr}"
    run_dir = tmp_path / "smoke"
    with open(run_dir / "metrics.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == EXPECTED_COLUMNS
        rows = list(reader)
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    for row in rows:
        for col in ALWAYS_FINITE:
            assert math.isfinite(float(row[col])), (col, row[col])
        assert 0.0 <= float(row["charts/success_rate"]) <= 1.0
    assert math.isfinite(float(rows[-1]["eval/success_rate"]))  # the final evaluation

    scalars = [json.loads(line) for line in (run_dir / "scalars.jsonl").read_text().splitlines()]
    assert {"tag", "step", "value", "wall_time"} <= set(scalars[0])
    assert {s["tag"] for s in scalars} >= {"charts/success_rate", "losses/loss"}

    summary = json.loads((run_dir / "summary.json").read_text())
    for name in ("trained", "random", "oracle"):
        assert 0.0 <= summary["eval"][name]["success_rate"] <= 1.0
    assert summary["eval"]["oracle"]["success_rate"] == 1.0  # binary search always wins on 1-10 in 4
    if _has("matplotlib"):
        assert (run_dir / "learning_curve.png").stat().st_size > 0
    assert "held-out evaluation" in proc.stdout


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_help_lists_every_field() -> None:
    import dataclasses
    import importlib.util

    proc = subprocess.run(
        [sys.executable, str(RECIPE), "--help"], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    spec = importlib.util.spec_from_file_location("cpu_reinforce_rebn", RECIPE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        docs = module.field_docs(module.Args)  # reads the source: needs the module registered
    finally:
        del sys.modules[spec.name]
    for field in dataclasses.fields(module.Args):
        assert "--" + field.name.replace("_", "-") in proc.stdout
        assert docs.get(field.name), f"Args.{field.name} has no docstring"


def test_bad_estimator_is_rejected() -> None:
    proc = subprocess.run(
        [sys.executable, str(RECIPE), "--estimator", "ppo"], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert proc.returncode == 2
    assert "--estimator must be one of rebn, grpo, rloo, reinforce, got 'ppo'" in proc.stderr
