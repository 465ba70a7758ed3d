"""Smoke test: `benchmarks/run.py --quick --no-reference` runs and writes well-formed JSON."""

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
