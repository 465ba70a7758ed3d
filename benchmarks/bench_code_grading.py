"""Code grading: test cases/s of a correct solution and p50 latency per submission, gem_core vs the reference."""

# A harness benchmark (run by run.py in each implementation's own venv). Both sides grade
# the same correct program ("sum the numbers") through their code env's grader:
#
# * ours: `gem_core.grading.code.grade_program` on the per-process sandbox pool
#   (`shared_sandbox`: warm bubblewrap-isolated workers, tests of a submission in parallel);
# * the reference: `gem.envs.code_env.CodeEnv._check_correct` (a 5-thread pool, one plain
#   unsandboxed `python -c` subprocess per test, sandbox_type="none"). code_env imports
#   `datasets` at module level (undeclared by gem-llm; reference_venv.py installs it) but
#   never uses it for grading: if it is missing, an empty stand-in is put in sys.modules. Its
#   subprocesses run the `python` found on PATH: the worker puts its own venv's bin first
#   (as an activated venv would), so a slow shim (pyenv) does not count against it.
#
# Two figures: the test cases/s of one submission with many tests (all graded, no cap), and
# the p50/p99 latency of a submission with the reference's default cap of 12 tests.
# `main(argv)` runs just this benchmark through run.py, both sides included.

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from common import fmt_ratio, fmt_seconds, percentile, render_table

NAME = "code_grading"
TITLE = "Code grading: test cases/s and p50 latency per submission (correct program)"
ORDER = 45
SOLUTION = "n = int(input())\nprint(sum(map(int, input().split())))"


def add_arguments(parser: Any) -> None:
    parser.add_argument("--code-tests", type=int, default=None, metavar="N",
                        help="code_grading: test cases in the throughput submission (default 200; quick 40)")


def config(args: Any) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    return {"throughput_tests": getattr(args, "code_tests", None) or (40 if quick else 200),
            "throughput_rounds": 1 if quick else 3,
            "latency_tests": 12, "latency_submissions": 5 if quick else 30, "warmup": 2 if quick else 5}


def timeout_s(config: dict[str, Any]) -> float:
    return 600.0


def make_tests(n: int, seed: int = 0) -> dict[str, list[str]]:
    """``n`` stdin/stdout cases of "sum the numbers" (the reference's dict shape)."""
    rng = random.Random(seed)
    inputs, outputs = [], []
    for _ in range(n):
        xs = [rng.randint(-1000, 1000) for _ in range(rng.randint(1, 50))]
        inputs.append(f"{len(xs)}\n{' '.join(map(str, xs))}\n")
        outputs.append(f"{sum(xs)}\n")
    return {"inputs": inputs, "outputs": outputs}


def _ours() -> tuple[Any, Any, dict[str, Any]]:
    from gem_core.grading.code import grade_program, parse_tests, shared_sandbox

    pool = shared_sandbox()
    pool.warm_up()

    def grade(tests: dict[str, list[str]]) -> bool:
        result = grade_program(SOLUTION, parse_tests(tests))
        return result.all_passed

    return grade, lambda: None, {"isolation": pool.isolation, "parallel": pool.size}


def _reference() -> tuple[Any, Any, dict[str, Any]]:
    if "datasets" not in sys.modules:
        try:
            import datasets  # noqa: F401
        except ImportError:  # see the header: imported by code_env, unused by its grading
            stand_in = types.ModuleType("datasets")
            stand_in.Dataset = type("Dataset", (), {})
            stand_in.DatasetDict = type("DatasetDict", (), {})
            stand_in.load_dataset = None
            sys.modules["datasets"] = stand_in
    from gem.envs.code_env import CodeEnv

    env = CodeEnv.__new__(CodeEnv)  # the grader's state, without loading a dataset
    from concurrent.futures import ThreadPoolExecutor

    env.dataset_name = "axon-rl/CodeContest"
    env.max_workers = 5
    env.thread_pool_executer = ThreadPoolExecutor(max_workers=env.max_workers)
    env.sandbox_type = "none"
    env.verbose = False
    # The reference writes a temporary directory per test under the working directory.
    workdir = tempfile.mkdtemp(prefix="gem-ref-code-")
    old_cwd, old_path = os.getcwd(), os.environ.get("PATH", "")
    os.chdir(workdir)
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + old_path

    def grade(tests: dict[str, list[str]]) -> bool:
        env.tests = tests
        env.max_tests = len(tests["inputs"])
        return bool(env._check_correct(SOLUTION))

    def close() -> None:
        env.thread_pool_executer.shutdown()
        os.chdir(old_cwd)
        os.environ["PATH"] = old_path

    return grade, close, {"isolation": "none (plain subprocess per test)", "parallel": env.max_workers}


def measure(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    grade, close, facts = _ours() if backend.name == "ours" else _reference()
    try:
        big = make_tests(config["throughput_tests"], seed=1)
        small = make_tests(config["latency_tests"], seed=2)
        if not grade(small):
            raise RuntimeError("the correct solution failed its tests; the grader is broken")
        for _ in range(config["warmup"]):
            grade(small)
        rates = []
        for _ in range(config["throughput_rounds"]):
            start = time.perf_counter()
            if not grade(big):
                raise RuntimeError("the correct solution failed the throughput tests")
            rates.append(len(big["inputs"]) / (time.perf_counter() - start))
        samples = []
        for _ in range(config["latency_submissions"]):
            start = time.perf_counter()
            grade(small)
            samples.append(time.perf_counter() - start)
    finally:
        close()
    return {**facts, "tests_per_s": max(rates), "tests_per_s_runs": rates,
            "throughput_tests": len(big["inputs"]), "latency_tests": config["latency_tests"],
            "p50_s": percentile(samples, 50), "p99_s": percentile(samples, 99), "n": len(samples),
            "cpus": os.cpu_count()}


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    def get(r: dict[str, Any] | None, key: str, fmt: Any) -> str:
        return fmt(r[key]) if r else "n/a"

    def rate(v: float) -> str:
        return f"{v:.0f}"

    n = (ours or ref or {}).get("throughput_tests", "?")
    k = (ours or ref or {}).get("latency_tests", "?")
    rows = [
        [f"test cases/s ({n} tests, 1 submission)", get(ours, "tests_per_s", rate), get(ref, "tests_per_s", rate),
         fmt_ratio(ours["tests_per_s"] / ref["tests_per_s"] if ours and ref else None)],
        [f"p50 per submission ({k} tests)", get(ours, "p50_s", fmt_seconds), get(ref, "p50_s", fmt_seconds),
         fmt_ratio(ref["p50_s"] / ours["p50_s"] if ours and ref else None)],
        [f"p99 per submission ({k} tests)", get(ours, "p99_s", fmt_seconds), get(ref, "p99_s", fmt_seconds),
         fmt_ratio(ref["p99_s"] / ours["p99_s"] if ours and ref else None)],
    ]
    text = render_table(["correct program", "ours: gem_core", "reference: gem", "speed-up"], rows)
    if ours:
        text += f"\nours: isolation={ours['isolation']}, {ours['parallel']} tests in parallel, {ours['cpus']} CPUs"
    if ref:
        text += f"\nreference: isolation={ref['isolation']}, {ref['parallel']} threads"
    if ref_note:
        text += f"\nreference: {ref_note}"
    return text


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    name = "code grading faster than the reference, sandboxed"
    if not ours:
        return [{"target": name, "value": "n/a", "met": None}]
    value = f"{ours['tests_per_s']:.0f} tests/s ({ours['isolation']})"
    if ref:
        value += f", reference {ref['tests_per_s']:.0f} tests/s"
    met = None if not ref else ours["tests_per_s"] > ref["tests_per_s"] and ours["isolation"] == "bwrap"
    return [{"target": name, "value": value, "met": met}]


def main(argv: list[str] | None = None) -> int:
    """Run only this benchmark through the harness (``--quick``, ``--json PATH``, ...)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run

    return run.main(["--only", NAME, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
