"""Smoke tests: `benchmarks/run.py --quick --no-reference` runs each benchmark and writes well-formed JSON."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "benchmarks" / "run.py"


def _run(tmp_path: Path, only: str, *extra: str) -> dict:
    """Run one benchmark quickly, check the common JSON shape, return its gem_core result."""
    out = tmp_path / "bench.json"
    cmd = [sys.executable, str(RUN), "--quick", "--no-reference", "--only", only,
           "--json", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, f"run.py failed:\n{proc.stdout}\n{proc.stderr}"
    assert f"== {only}:" in proc.stdout
    data = json.loads(out.read_text())
    assert data["meta"]["quick"] is True
    assert data["meta"]["reference"]["status"] == "skipped (--no-reference)"
    assert list(data["benchmarks"]) == [only]
    bench = data["benchmarks"][only]
    assert bench["errors"] == {}
    assert bench["reference"] is None
    return bench["ours"]


def test_import_bench(tmp_path: Path) -> None:
    result = _run(tmp_path, "import")
    assert result["module"] == "gem_core"
    assert result["seconds"] > 0
    assert len(result["runs"]) >= 3 and all(t > 0 for t in result["runs"])
    assert result["process_seconds"] >= result["seconds"]


def test_vector_bench(tmp_path: Path) -> None:
    if not hasattr(importlib.import_module("gem_core.vector"), "make_vec"):
        pytest.skip("gem_core.vector.make_vec does not exist yet")
    result = _run(tmp_path, "vector", "--vector-env", "toy:Echo-v0")
    entry = result["envs"]["toy:Echo-v0"]
    assert entry["episode_len"] >= 1
    row = entry["by_num_envs"]["8"]
    for mode in ("raw", "sync", "async"):
        assert "error" not in row[mode], row[mode]
        assert row[mode]["steps_per_s"] > 0
        assert all(rate > 0 for rate in row[mode]["trials"])
    for key in ("sync_overhead", "async_overhead", "async_over_sync"):
        assert row["ratios"][key] > 0


def test_math_grading_bench(tmp_path: Path) -> None:
    pytest.importorskip("math_verify", reason="the math_grading benchmark needs math-verify (gem-core[math])")
    result = _run(tmp_path, "math_grading", "--math-envs", "4", "--math-threads", "2")
    assert result["num_envs"] == 4
    for key, threads in (("single", 1), ("concurrent", 2)):
        entry = result[key]
        assert "error" not in entry, entry
        assert entry["threads"] == threads and entry["answers"] > 0 and entry["answers_per_s"] > 0
        assert 0 < entry["p50_s"] <= entry["p99_s"]
        assert entry["agreement"] == 1.0 and entry["flagged"] == 0  # every answer graded as expected
    if result["memory"] is not None:  # Linux: the env process plus its 2 grader workers
        assert result["memory"]["processes"] >= 3 and result["memory"]["pss_bytes"] > 0


def test_code_grading_bench(tmp_path: Path) -> None:
    result = _run(tmp_path, "code_grading", "--code-tests", "12")
    assert result["throughput_tests"] == 12 and result["latency_tests"] == 12
    assert result["tests_per_s"] > 0 and all(r > 0 for r in result["tests_per_s_runs"])
    assert 0 < result["p50_s"] <= result["p99_s"] and result["n"] == 5
    assert result["isolation"] in ("bwrap", "netns", "rlimits") and result["parallel"] >= 1
