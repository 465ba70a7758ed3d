"""Ray: per-step overhead of RayVectorEnv vs AsyncVectorEnv vs sync, and code-grading test cases/s on 1 vs 2 nodes."""

# A standalone benchmark (gem_core only; run.py runs its main() with --quick/--json).
# Everything runs on a local `ray.cluster_utils.Cluster` on the loopback address, so
# "nodes" here are simulated: they share this machine's CPUs. Two figures:
#
# * overhead: seconds per vector step of N cheap sub-envs (toy:Echo-v0) for SyncVectorEnv
#   (in-process), AsyncVectorEnv (2 worker processes) and RayVectorEnv (2 actors); the
#   Ray column minus the sync one is the cost Ray adds per step;
# * code grading: test cases/s of a correct "sum the numbers" program graded in the
#   actors' own (node-local) sandbox pools, through RayVectorEnv, with one actor per node
#   on a cluster of 1 and of 2 nodes (1 CPU each).

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Before Ray is imported: every node of the local cluster on 127.0.0.1 (Ray 2.60, Linux).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from common import fmt_seconds, render_table  # noqa: E402

SOLUTION = "n = int(input())\nprint(sum(map(int, input().split())))"
MB = 1024 * 1024


def make_tests(n: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    inputs, outputs = [], []
    for _ in range(n):
        xs = [rng.randint(-1000, 1000) for _ in range(rng.randint(1, 50))]
        inputs.append(f"{len(xs)}\n{' '.join(map(str, xs))}\n")
        outputs.append(f"{sum(xs)}\n")
    return {"inputs": inputs, "outputs": outputs}


def grading_env(num_tests: int):
    """An env whose every step grades the action (a program) on ``num_tests`` test cases."""
    from gem_core import Env

    class GradeEnv(Env):
        def __init__(self) -> None:
            from gem_core.grading.code import parse_tests

            self.tests = parse_tests(make_tests(num_tests, 0))

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return "write a program", {}

        def step(self, action):
            from gem_core.grading.code import grade_program

            result = grade_program(action, self.tests)
            return "graded", float(result.all_passed), False, False, {"passed": result.all_passed}

    return GradeEnv


def _cluster(num_nodes: int, cpus: float, tmp: str) -> Any:
    """The loopback cluster of `gem_core.testing.ray_cluster`, its files all under ``tmp``."""
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])
    from gem_core.testing.ray_cluster import loopback_cluster

    os.makedirs(tmp, exist_ok=True)
    return loopback_cluster(tmp, num_nodes=num_nodes,
                            node_args={"num_cpus": cpus, "object_store_memory": 80 * MB})


def _per_step(vec: Any, steps: int, n: int) -> float:
    vec.reset(seed=0)
    for _ in range(max(3, steps // 10)):
        vec.step(["0"] * n)
    start = time.perf_counter()
    for _ in range(steps):
        vec.step(["0"] * n)
    return (time.perf_counter() - start) / steps


def overhead(num_envs: list[int], steps: int, tmp: str) -> list[dict[str, Any]]:
    from gem_core.vector import make_vec

    rows = []
    with _cluster(2, 2, tmp):
        for n in num_envs:
            row: dict[str, Any] = {"num_envs": n}
            for mode, kwargs in [
                ("sync", {}),
                ("async", {"num_workers": 2}),
                ("ray", {"num_workers": 2, "ray_options": {"num_cpus": 0.5, "scheduling_strategy": "SPREAD"}}),
            ]:
                vec = make_vec("toy:Echo-v0", n, vectorization_mode=mode, **kwargs)
                try:
                    row[mode] = _per_step(vec, steps, n)
                finally:
                    vec.close()
            rows.append(row)
    return rows


def grading(nodes: int, num_tests: int, steps: int, tmp: str) -> dict[str, Any]:
    import functools

    from gem_core.distributed import RayVectorEnv

    with _cluster(nodes, 1, tmp):
        envs = [functools.partial(grading_env(num_tests))] * nodes
        vec = RayVectorEnv(envs, num_workers=nodes, timeout=300,
                           ray_options={"num_cpus": 1, "scheduling_strategy": "SPREAD"})
        try:
            vec.reset(seed=0)
            vec.step([SOLUTION] * nodes)  # warm the sandbox pools
            start = time.perf_counter()
            for _ in range(steps):
                _, rewards, *_ = vec.step([SOLUTION] * nodes)
                assert rewards.tolist() == [1.0] * nodes
            wall = time.perf_counter() - start
            distinct_nodes = len(set(vec.worker_nodes))
        finally:
            vec.close()
    return {"nodes": nodes, "distinct_nodes": distinct_nodes, "test_cases": nodes * steps * num_tests,
            "wall_s": wall, "cases_per_s": nodes * steps * num_tests / wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    try:
        import ray  # noqa: F401
    except ImportError:
        print('Ray is not installed: pip install "gem-core[ray]" (skipped)')
        return 0
    num_envs = [8] if args.quick else [8, 64]
    steps = 50 if args.quick else 300
    num_tests, grade_steps = (20, 5) if args.quick else (50, 20)
    with tempfile.TemporaryDirectory(prefix="gem-bench-ray-") as tmp:
        over = overhead(num_envs, steps, os.path.join(tmp, "a"))
        grade = [grading(k, num_tests, grade_steps, os.path.join(tmp, f"g{k}")) for k in (1, 2)]
    load = os.getloadavg()[0]
    table = render_table(
        ["sub-envs", "sync / step", "async (2 proc) / step", "ray (2 actors) / step", "ray - sync", "ray / async"],
        [[str(r["num_envs"]), fmt_seconds(r["sync"]), fmt_seconds(r["async"]), fmt_seconds(r["ray"]),
          fmt_seconds(r["ray"] - r["sync"]), f"{r['ray'] / r['async']:.1f}x"] for r in over],
    )
    table2 = render_table(
        ["simulated nodes", "actors on distinct nodes", "test cases", "wall", "test cases/s"],
        [[str(g["nodes"]), str(g["distinct_nodes"]), str(g["test_cases"]), fmt_seconds(g["wall_s"]),
          f"{g['cases_per_s']:.0f}"] for g in grade],
    )
    print(f"Per-step cost, toy:Echo-v0 (a cheap env), {steps} steps; load average {load:.1f} on "
          f"{os.cpu_count()} CPUs\n{table}\n")
    print(f"Code grading in the actors' sandboxes ({num_tests} tests per submission, one actor per "
          f"node, 1 CPU per node; the nodes share this machine's {os.cpu_count()} CPUs)\n{table2}")
    if args.json:
        Path(args.json).write_text(json.dumps({"overhead": over, "grading": grade, "load_avg": load,
                                               "cpus": os.cpu_count()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
