"""RL2 HEAD (source only): its checks run in a subprocess with GEM_RL2_SRC first on sys.path.

rl-square 0.0.2 (installed) and HEAD share the package name ``RL2``, so one process holds
one of them. Set ``GEM_RL2_SRC`` to a checkout of https://github.com/ChenmienTan/RL2
(tested at 9161ede) to run ``head_checks/``; without it this test is skipped with the
reason in the report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = os.environ.get("GEM_RL2_SRC", "")
HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(
    not (Path(SRC) / "RL2" / "__init__.py").is_file(),
    reason="RL2 HEAD checks not run: set GEM_RL2_SRC to a checkout of ChenmienTan/RL2 (tested at 9161ede)"
    + (f"; {SRC!r} holds no RL2/__init__.py" if SRC else ""),
)
def test_rl2_head_checks():
    env = {**os.environ, "GEM_RL2_HEAD": "1", "GEM_RL2_SRC": SRC}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings", str(HERE / "head_checks")],
        cwd=HERE.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = (proc.stdout + proc.stderr)[-6000:]
    print(tail)
    assert proc.returncode == 0, f"RL2 HEAD checks failed (exit {proc.returncode}):\n{tail}"
    assert " passed" in proc.stdout and "skipped" not in proc.stdout.rsplit("\n", 3)[-2], tail
