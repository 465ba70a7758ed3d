"""Import time of the package (``import gem_core`` / ``import gem``) in fresh interpreters."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from common import fmt_ratio, fmt_seconds, render_table

NAME = "import"
TITLE = "import time in a fresh interpreter (median of runs)"
ORDER = 10

_PROBE = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def config(args: Any) -> dict[str, Any]:
    return {"runs": 3 if args.quick else 9, "warmup": 1, "importtime_top": 0 if args.quick else 8}


def timeout_s(config: dict[str, Any]) -> float:
    return 60 + 30 * (config["runs"] + config["warmup"])


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    # Run from an empty directory so nothing in the caller's cwd shadows the package.
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=os.environ.copy(),
                              timeout=120)


def _top_imports(module: str, top: int) -> list[dict[str, Any]]:
    """The slowest top-level imports under ``-X importtime`` (cumulative microseconds)."""
    proc = _run([sys.executable, "-X", "importtime", "-c", f"import {module}"])
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:"):].split("|"))
        if not cumulative.isdigit():
            continue
        name = name.strip()
        if name in (module, "site", "encodings") or name.startswith("__editable__"):
            continue  # the package itself and the interpreter's own start-up
        rows.append({"module": name, "cumulative_s": int(cumulative) / 1e6})
    rows.sort(key=lambda r: r["cumulative_s"], reverse=True)
    return rows[:top]


def measure(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    module = backend.module
    cmd = [sys.executable, "-c", _PROBE.format(module=module)]
    import_s, process_s = [], []
    for i in range(config["warmup"] + config["runs"]):
        start = time.perf_counter()
        proc = _run(cmd)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"`import {module}` failed: {proc.stderr.strip()[-500:]}")
        if i >= config["warmup"]:  # the warm-up run also writes the .pyc files
            import_s.append(float(proc.stdout.strip().splitlines()[-1]))
            process_s.append(wall)
    result = {
        "module": module,
        "seconds": statistics.median(import_s),
        "runs": import_s,
        "process_seconds": statistics.median(process_s),
    }
    if config.get("importtime_top"):
        result["slowest_imports"] = _top_imports(module, config["importtime_top"])
    return result


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    def cell(r: dict[str, Any] | None, key: str) -> str:
        return fmt_seconds(r[key]) if r else "n/a"

    ratio = ref["seconds"] / ours["seconds"] if ours and ref else None
    rows = [
        ["import (in-process)", cell(ours, "seconds"), cell(ref, "seconds"), fmt_ratio(ratio)],
        ["python -c 'import ...' (wall)", cell(ours, "process_seconds"), cell(ref, "process_seconds"),
         ""],
    ]
    text = render_table(["", "ours: gem_core", "reference: gem", "ref/ours"], rows)
    if ours and ours.get("slowest_imports"):
        slow = ", ".join(f"{r['module']} {fmt_seconds(r['cumulative_s'])}"
                         for r in ours["slowest_imports"][:5])
        text += f"\nslowest imports under gem_core: {slow}"
    if ref_note:
        text += f"\nreference: {ref_note}"
    return text


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    seconds = ours["seconds"] if ours else None
    value = fmt_seconds(seconds) + (f" (reference {fmt_seconds(ref['seconds'])})" if ref else "")
    return [{"target": "import gem_core < 0.15 s", "value": value,
             "met": None if seconds is None else seconds < 0.15}]
