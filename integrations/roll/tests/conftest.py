"""Fixtures for gem-roll's tests: ROLL from GEM_ROLL_SRC, a local Ray, a tiny model.

ROLL is not on PyPI: its source tree is found through ``GEM_ROLL_SRC`` (e.g.
``~/.cache/gem/roll-src``, see the README). Without it, or without ROLL's requirements
(the light venv of ``make test-roll``), the ROLL-bound tests are skipped with the reason;
the tests of the config writer and the normaliser run everywhere.

ROLL writes its logs to ``ROLL_LOG_DIR`` and Ray its sockets and logs to ``RAY_TMPDIR``:
both point into pytest's temp dir (set before ROLL or Ray is imported).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

HERE = Path(__file__).resolve().parent
RECIPE = HERE.parents[2] / "recipes" / "roll_rebn.py"


def roll_skip_reason() -> str | None:
    """Why the ROLL-bound tests cannot run here (``None``: they can)."""
    src = os.environ.get("GEM_ROLL_SRC", "")
    if not src:
        return (
            "ROLL is not on PyPI: set GEM_ROLL_SRC to a ROLL source tree (alibaba/ROLL, tested "
            "at 8eb27cc; see integrations/roll/README.md) to run the ROLL-bound tests"
        )
    if not (Path(src) / "roll" / "pipeline" / "agentic" / "agentic_pipeline.py").is_file():
        return f"GEM_ROLL_SRC={src!r} holds no ROLL tree (roll/pipeline/agentic/agentic_pipeline.py missing)"
    missing = [m for m in ("torch", "ray", "tensordict", "dacite", "hydra", "gem") if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"ROLL's requirements are not installed ({', '.join(missing)} missing): run "
            "`GEM_ROLL_SRC=... make test-roll` (the full venv) or install requirements-roll.txt"
        )
    return None


ROLL_SKIP = roll_skip_reason()
if ROLL_SKIP is None and os.environ["GEM_ROLL_SRC"] not in sys.path:
    sys.path.insert(0, os.environ["GEM_ROLL_SRC"])


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """The session's dir for ROLL logs and Ray temp files (short: Ray's socket paths are limited)."""
    return tmp_path_factory.mktemp("r")


@pytest.fixture(scope="session")
def roll_runtime(run_dir):
    """ROLL importable, ``ROLL_LOG_DIR``/``RAY_TMPDIR`` in the temp dir, a local 2-CPU Ray on 127.0.0.1."""
    if ROLL_SKIP:
        pytest.skip(ROLL_SKIP)
    logs, ray_tmp = run_dir / "logs", run_dir / "ray"
    logs.mkdir(exist_ok=True)
    ray_tmp.mkdir(exist_ok=True)
    os.environ["ROLL_LOG_DIR"] = str(logs)
    os.environ["RAY_TMPDIR"] = str(ray_tmp)
    paths = [os.environ["GEM_ROLL_SRC"], str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))  # for Ray's worker processes
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=2,
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            _temp_dir=str(ray_tmp),
            log_to_driver=False,
            namespace="gem_roll_tests",
        )
    yield {"logs": logs, "ray": ray_tmp}
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_model_path() -> str:
    from gem_core.rl.testing import build_tiny_model

    return str(build_tiny_model())
