"""`make test`: run every test target (each in its own venv), even after one fails, then one table.

Each target is ``make test-<name>`` with its pytest results written as JUnit XML under
``--results``; a target whose venv cannot be installed, whose pytest fails or collects
nothing (exit 5) counts as failed. The table gives, per target: passed, failed (failures
and errors), skipped, the pytest seconds and the wall seconds including any venv install.
Exit status: 0 when every target passed, 1 otherwise. Standard library only: it runs under
the machine's own ``python3`` before any venv exists.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path


def junit_counts(path: Path) -> dict[str, float] | None:
    """passed/failed/skipped/seconds from a pytest JUnit XML file; ``None`` if absent or unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = failed = skipped = 0
    seconds = 0.0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
        seconds += float(suite.get("time", 0.0))
    return {"passed": total - failed - skipped, "failed": failed, "skipped": skipped, "pytest_s": seconds}


def run_target(make: str, name: str, results: Path) -> dict[str, object]:
    xml = results / f"{name}.xml"
    xml.unlink(missing_ok=True)  # a stale file from an earlier run never counts
    print(f"\n=== make test-{name} ===", flush=True)
    start = time.monotonic()
    rc = subprocess.call([make, "--no-print-directory", f"test-{name}", f"TEST_RESULTS={results}"])
    wall = time.monotonic() - start
    counts = junit_counts(xml)
    row: dict[str, object] = {"target": f"test-{name}", "rc": rc, "wall_s": round(wall, 1)}
    if counts is None:
        row.update(passed=0, failed=0, skipped=0, pytest_s=0.0,
                   status=f"FAILED before pytest ran (rc {rc}: venv install?)" if rc else "no results")
    else:
        row.update(counts)
        if rc == 0:
            row["status"] = "ok"
        elif rc == 5:
            row["status"] = "FAILED: no tests collected"
        else:
            row["status"] = f"FAILED (rc {rc})"
    if rc == 0 and counts is None:
        row["status"] = "FAILED: pytest wrote no results"
    return row


def table(rows: list[dict[str, object]]) -> str:
    head = ["target", "passed", "failed", "skipped", "pytest s", "wall s", "status"]
    body = [[str(r["target"]), str(r["passed"]), str(r["failed"]), str(r["skipped"]),
             f"{float(r['pytest_s']):.0f}", f"{float(r['wall_s']):.0f}", str(r["status"])] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in (0, 6) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", help="target names: core verl trl ...")
    parser.add_argument("--results", type=Path, required=True, help="directory for the JUnit XML files")
    parser.add_argument("--make", default=os.environ.get("MAKE", "make"))
    args = parser.parse_args(argv)
    results = args.results.resolve()
    results.mkdir(parents=True, exist_ok=True)
    make = shutil.which(args.make) or args.make
    start = time.monotonic()
    rows = [run_target(make, name, results) for name in args.targets]
    total = time.monotonic() - start
    failed = [r["target"] for r in rows if r["status"] != "ok"]
    summary = table(rows)
    (results / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    (results / "summary.json").write_text(json.dumps({"rows": rows, "wall_s": round(total, 1)}, indent=1),
                                          encoding="utf-8")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n=== make test: {len(rows)} targets in {total / 60:.1f} min (load average now {load}) ===")
    print(summary)
    if failed:
        print(f"\nFAILED: {' '.join(map(str, failed))}")
        return 1
    print("\nall targets passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
