""".ci/test_targets.py (`make test`): every target runs after a failing one, one table, the exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[1] / ".ci" / "test_targets.py"

# A stand-in for make: `make --no-print-directory test-NAME TEST_RESULTS=DIR` does what
# the target's name says, as the real targets would (pytest's JUnit XML, its exit status).
FAKE_MAKE = '''#!{python}
import sys
name = sys.argv[2].removeprefix("test-")
results = sys.argv[3].split("=", 1)[1]
with open(results + "/calls.log", "a") as f:
    f.write(name + "\\n")
def junit(tests, failures=0, errors=0, skipped=0):
    with open(f"{{results}}/{{name}}.xml", "w") as f:
        f.write(f'<testsuites><testsuite name="pytest" tests="{{tests}}" failures="{{failures}}" '
                f'errors="{{errors}}" skipped="{{skipped}}" time="1.5"/></testsuites>')
if name == "good":
    junit(10, skipped=2); sys.exit(0)
if name == "bad":
    junit(7, failures=1, errors=2); sys.exit(1)
if name == "empty":
    junit(0); sys.exit(5)
if name == "noinstall":
    sys.exit(2)  # the venv's pip install failed: pytest never ran
'''


def run(tmp_path: Path, *targets: str) -> tuple[int, str, Path]:
    make = tmp_path / "make"
    make.write_text(FAKE_MAKE.format(python=sys.executable))
    make.chmod(0o755)
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    (results / "bad.xml").write_text("<testsuites/>")  # stale: must not count
    proc = subprocess.run([sys.executable, str(RUNNER), "--results", str(results), "--make", str(make),
                           *targets], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, results


def test_a_failing_target_does_not_hide_the_others(tmp_path):
    rc, out, results = run(tmp_path, "bad", "noinstall", "empty", "good")
    assert rc == 1
    assert (results / "calls.log").read_text().split() == ["bad", "noinstall", "empty", "good"]
    rows = {r["target"]: r for r in json.loads((results / "summary.json").read_text())["rows"]}
    assert (rows["test-bad"]["passed"], rows["test-bad"]["failed"], rows["test-bad"]["status"]) == (4, 3, "FAILED (rc 1)")
    assert rows["test-noinstall"]["status"].startswith("FAILED before pytest ran (rc 2")
    assert rows["test-empty"]["status"] == "FAILED: no tests collected"
    assert (rows["test-good"]["passed"], rows["test-good"]["skipped"], rows["test-good"]["status"]) == (8, 2, "ok")
    table = out[out.index("target  "):]
    assert table.splitlines()[0].split() == ["target", "passed", "failed", "skipped", "pytest", "s", "wall", "s", "status"]
    good = next(line for line in table.splitlines() if line.startswith("test-good"))
    assert good.split() == ["test-good", "8", "0", "2", "2", "0", "ok"]
    assert out.rstrip().endswith("FAILED: test-bad test-noinstall test-empty")
    assert (results / "summary.txt").read_text().strip() == table.split("\n\n")[0].strip()


def test_all_passing_exits_zero(tmp_path):
    rc, out, _ = run(tmp_path, "good", "good")
    assert rc == 0 and out.rstrip().endswith("all targets passed")
