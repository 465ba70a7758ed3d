"""Smoke test: `recipes/cpu_reinforce_rebn.py` trains for two tiny iterations in a subprocess."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gem_core.rl.recipe_cli import field_docs

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
    "losses/value_loss",
    "eval/success_rate",
    "eval/turns_to_solve",
]
# Columns that must hold a finite number on every row (turns_to_solve is empty when no
# episode of the batch succeeded; eval/* only on evaluation rows).
ALWAYS_FINITE = [
    c
    for c in EXPECTED_COLUMNS
    if c not in ("charts/turns_to_solve", "eval/success_rate", "eval/turns_to_solve", "losses/value_loss")
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


def test_help_shows_every_field_with_its_docstring() -> None:
    import dataclasses
    import importlib.util
    import re

    proc = subprocess.run(
        [sys.executable, str(RECIPE), "--help"], capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", proc.stdout).split())  # tyro's boxes and wrapping away
    spec = importlib.util.spec_from_file_location("cpu_reinforce_rebn", RECIPE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        docs = field_docs(module.Args)
    finally:
        del sys.modules[spec.name]
    for field in dataclasses.fields(module.Args):
        assert "--" + field.name.replace("_", "-") in flat
        assert docs.get(field.name), f"Args.{field.name} has no docstring"
        assert " ".join(docs[field.name].split()[:6]) in flat, field.name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--estimator", "a2c"], "invalid choice 'a2c' for argument '--estimator'"),
        (["--truncated-response", "keep"], "invalid choice 'keep' for argument '--truncated-response'"),
        (["--seed", "x"], "--seed"),
    ],
)
def test_bad_option_values_are_rejected_by_the_parser(args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(RECIPE), *args], capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr


def _recipe(*args: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RECIPE), *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


@pytest.mark.timeout(300)
def test_recipe_trains_the_assistant_of_tau_retail_with_the_scripted_user(tmp_path: Path) -> None:
    """The multi-agent env's single-agent view plugs into the training loop: episodes against
    the scripted user, graded on the database, and policy-gradient steps that move the model.
    Plain REINFORCE (A = G) with the truncation penalty gives every token a nonzero advantage
    even though the untrained model solves nothing (the scripted user ends a conversation
    that strays from its script)."""
    proc = _recipe(
        "--env-id", "tau:Retail-v0", "--env-kwargs", '{"tasks": ["CancelHeadphones", "ChangeOrderAddress"]}',
        "--history", "chat", "--warmup-steps", "0", "--max-context", "8192", "--max-positions", "8192",
        "--max-new-tokens", "16", "--max-turns", "3", "--estimator", "reinforce",
        "--iterations", "2", "--episodes-per-iter", "4", "--group-size", "2", "--eval-episodes", "2",
        "--threads", "1", "--output-dir", str(tmp_path), "--run-name", "tau", "--no-progress",
        timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, f"recipe failed:\n{proc.stdout}\n{proc.stderr}"
    with open(tmp_path / "tau" / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    for row in rows:
        assert float(row["charts/error_episodes"]) == 0.0  # every episode was played and graded
        assert float(row["losses/grad_norm"]) > 0.0
        assert float(row["charts/mean_return"]) < 0.0  # the truncation penalty, not a crash
    assert float(rows[1]["losses/kl_to_warmup"]) > 0.0  # the first step moved the model
    summary = json.loads((tmp_path / "tau" / "summary.json").read_text())
    assert summary["eval"]["oracle"] is None  # games only
    random_policy = summary["eval"]["random"]  # the env's own sample_random_action, through the view
    assert random_policy["mean_turns"] > 1.0 and 0.0 <= random_policy["success_rate"] <= 1.0
    assert "held-out evaluation" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env-id", "tau:Retail-v0"], "this env has none; pass --warmup-steps 0"),
        (["--env-kwargs", "[1]"], "--env-kwargs must be a JSON object, got '[1]'"),
        (["--env-kwargs", "{tasks"], "--env-kwargs must be a JSON object, got '{tasks'"),
        (["--max-context", "5000"], "--max-context (5000) exceeds the tiny model's --max-positions (4096)"),
        (["--gamma", "1.5"], "--gamma must be in [0, 1], got 1.5"),
        (["--eval-temperature", "-1"], "--eval-temperature must be >= 0, got -1.0"),
        (["--episodes-per-iter", "6", "--group-size", "4"], "--episodes-per-iter (6) must be a multiple of --group-size (4)"),
    ],
)
def test_bad_arguments_are_rejected(args: list[str], message: str, tmp_path: Path) -> None:
    proc = _recipe(*args, "--output-dir", str(tmp_path))
    assert proc.returncode != 0
    assert message in proc.stderr + proc.stdout


@pytest.mark.timeout(300)
def test_ppo_trains_a_critic_beside_the_policy(tmp_path: Path) -> None:
    """--estimator ppo: a critic regresses the turns' GAE returns (its loss falls from the
    zero-initialised head's), the policy takes --ppo-epochs clipped steps per batch."""
    proc = _run(tmp_path, "--estimator", "ppo", "--iterations", "4", "--ppo-epochs", "3")
    assert proc.returncode == 0, f"recipe failed:\n{proc.stdout}\n{proc.stderr}"
    with open(tmp_path / "smoke" / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    value_loss = [float(r["losses/value_loss"]) for r in rows]
    assert all(math.isfinite(v) and v >= 0 for v in value_loss), value_loss
    assert value_loss[-1] < value_loss[0], value_loss
    for row in rows:
        for col in ALWAYS_FINITE:
            assert math.isfinite(float(row[col])), (col, row[col])
    # The other estimators train no critic.
    proc = _run(tmp_path, "--estimator", "rebn", "--iterations", "1", "--run-name", "rebn")
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "rebn" / "metrics.csv", newline="") as fh:
        assert math.isnan(float(next(csv.DictReader(fh))["losses/value_loss"]))


@pytest.mark.timeout(300)
def test_eval_temperature_samples_the_held_out_evaluation_with_a_fixed_seed(tmp_path: Path) -> None:
    """--eval-temperature 1.0: the held-out evaluation samples (said in the report), and with
    its fixed sampling seed a rerun reproduces it exactly; the default is greedy."""
    evals = []
    for name, extra in (("greedy", []), ("sampled", ["--eval-temperature", "1.0"]), ("again", ["--eval-temperature", "1.0"])):
        proc = _run(tmp_path, "--iterations", "1", "--eval-episodes", "16", "--run-name", name, *extra)
        assert proc.returncode == 0, f"recipe failed:\n{proc.stdout}\n{proc.stderr}"
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        evals.append(summary["eval"]["trained"])
        expected = "sampling at temperature 1" if extra else "greedy decoding"
        assert f"env seeds from 10000, {expected}:" in proc.stdout
        assert summary["args"]["eval_temperature"] == (1.0 if extra else 0.0)
    assert evals[1] == evals[2]
