"""Learning evidence: does the CPU recipe learn, does gamma < 1 solve faster, how does ReBN compare?

Runs ``recipes/cpu_reinforce_rebn.py`` once per (configuration, seed), ``--jobs`` runs at
a time (each run is a subprocess using the recipe's own defaults unless overridden here), then
prints three tables from the runs' ``summary.json`` files:

1. the default recipe's trained policy vs the random policy and the binary-search oracle
   on the same held-out env seeds (greedy decoding);
2. ReBN with gamma = 0.9 vs gamma = 1.0: success and mean turns to solve;
3. ReBN vs GRPO vs plain REINFORCE (A = G) on the same budget, gamma = 0.9.

Launch (about 12 recipe runs; the default budget takes roughly an hour on 2 CPU cores)::

    ~/.cache/gem/venv-core/bin/python benchmarks/learning_evidence.py
    ... learning_evidence.py --iterations 100          # a reduced budget for every run
    ... learning_evidence.py --seeds 1 2 --only gamma   # a subset

Runs land in ``benchmarks/results/learning/<tag>/`` (gitignored); a run whose
``summary.json`` exists is reused (``--force`` reruns it), so an interrupted experiment
resumes. The tables are printed and written to ``benchmarks/results/learning/<tag>.md``;
the figures of record are copied by hand into ``benchmarks/LEARNING.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "cpu_reinforce_rebn.py"

# name -> recipe arguments (on top of the shared ones). Every estimator uses gamma 0.9,
# so the estimator comparison changes exactly one thing.
CONFIGS: dict[str, list[str]] = {
    "rebn_g0.9": ["--estimator", "rebn", "--gamma", "0.9"],
    "rebn_g1.0": ["--estimator", "rebn", "--gamma", "1.0"],
    "grpo_g0.9": ["--estimator", "grpo", "--gamma", "0.9"],
    "reinforce_g0.9": ["--estimator", "reinforce", "--gamma", "0.9"],
    "ppo_g0.9": ["--estimator", "ppo", "--gamma", "0.9"],
}
# The slack setting: the same 1-10 game with 10 turns instead of 4, so that a linear search
# also wins within the budget and a policy has room to solve in more or fewer turns.
SLACK = ["--max-turns", "10"]
for _name in list(CONFIGS):
    CONFIGS[f"slack_{_name}"] = [*CONFIGS[_name], *SLACK]
GROUPS = {
    "gamma": ["rebn_g0.9", "rebn_g1.0"],
    "estimators": ["rebn_g0.9", "grpo_g0.9", "reinforce_g0.9", "ppo_g0.9"],
    "slack_gamma": ["slack_rebn_g0.9", "slack_rebn_g1.0"],
    "slack_estimators": ["slack_rebn_g0.9", "slack_grpo_g0.9", "slack_reinforce_g0.9", "slack_ppo_g0.9"],
}
TITLES = {
    "gamma": "Discount: γ = 0.9 vs γ = 1.0 (ReBN)",
    "estimators": "Estimators, same budget (γ = 0.9)",
    "slack_gamma": "Discount with slack (1-10 in 10 turns): γ = 0.9 vs γ = 1.0 (ReBN)",
    "slack_estimators": "Estimators with slack (1-10 in 10 turns), same budget (γ = 0.9)",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="recipe seeds per configuration")
    p.add_argument("--only", choices=["all", *GROUPS], nargs="+", default=["all"], help="which comparisons to run")
    p.add_argument("--iterations", type=int, default=None, help="override the recipe's --iterations (reduced budget)")
    p.add_argument("--episodes-per-iter", type=int, default=None, help="override the recipe's --episodes-per-iter")
    p.add_argument("--eval-episodes", type=int, default=200, help="held-out evaluation episodes per run")
    p.add_argument("--tag", default="default", help="name of this experiment's results folder")
    p.add_argument("--results-dir", type=Path, default=REPO / "benchmarks" / "results" / "learning")
    p.add_argument("--force", action="store_true", help="rerun runs that already have a summary.json")
    p.add_argument("--python", default=sys.executable, help="interpreter for the recipe")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (each gets --threads 1 when > 1)")
    p.add_argument("--recipe-args", default="", help="extra recipe arguments for every run, e.g. '--history last'")
    return p.parse_args(argv)


def run_one(args: argparse.Namespace, name: str, seed: int, out_dir: Path) -> dict[str, Any]:
    """Run the recipe for one configuration and seed (or reuse its summary)."""
    run_name = f"{name}__s{seed}"
    summary_path = out_dir / run_name / "summary.json"
    if summary_path.is_file() and not args.force:
        print(f"  {run_name}: reusing {summary_path.relative_to(REPO)}", flush=True)
        return json.loads(summary_path.read_text())
    cmd = [
        args.python, str(RECIPE), *CONFIGS[name], "--seed", str(seed),
        "--eval-episodes", str(args.eval_episodes), "--output-dir", str(out_dir),
        "--run-name", run_name, "--eval-every", "50", "--no-progress",
    ]  # fmt: skip
    if args.iterations is not None:
        cmd += ["--iterations", str(args.iterations)]
    if args.episodes_per_iter is not None:
        cmd += ["--episodes-per-iter", str(args.episodes_per_iter)]
    if args.jobs > 1:
        cmd += ["--threads", "1"]
    cmd += shlex.split(args.recipe_args)
    print(f"  {run_name}: {' '.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.timeout)
    (out_dir / f"{run_name}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{run_name} failed (exit {proc.returncode}); log: {out_dir / f'{run_name}.log'}\n"
            + proc.stderr[-2000:]
        )
    summary = json.loads(summary_path.read_text())
    ev = summary["eval"]["trained"]
    print(
        f"  {run_name}: success {ev['success_rate']:.3f}, turns to solve {ev['turns_to_solve']:.2f} "
        f"({time.perf_counter() - start:.0f} s)",
        flush=True,
    )
    return summary


def mean_std(values: list[float]) -> str:
    """``mean ± std`` over seeds (sample std), NaNs dropped."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return "n/a"
    if len(vals) == 1:
        return f"{vals[0]:.3f}"
    return f"{statistics.mean(vals):.3f} ± {statistics.stdev(vals):.3f}"


def turns_with_budget(run: dict[str, Any]) -> float | None:
    """Mean turns over every held-out target, an unsolved one counted as the turn budget
    (so two policies are compared on the same target set)."""
    t, budget = run["eval"]["trained"], run.get("turn_budget")
    if budget is None:
        return None
    solved = t["success_rate"]
    return solved * t["turns_to_solve"] + (1.0 - solved) * budget if solved > 0 else float(budget)


def config_row(name: str, runs: list[dict[str, Any]]) -> str:
    """One markdown table row summarising a configuration's runs."""
    trained = [r["eval"]["trained"] for r in runs]
    per_seed = ", ".join(f"{t['success_rate']:.2f}" for t in trained)
    return (
        f"| {name} | {len(runs)} | {mean_std([t['success_rate'] for t in trained])} | {per_seed} | "
        f"{mean_std([turns_with_budget(r) for r in runs])} | "
        f"{mean_std([t['turns_to_solve'] for t in trained])} | "
        f"{mean_std([r['wall_time_s'] for r in runs])} |"
    )


HEADER = (
    "| configuration | seeds | held-out success (mean ± std) | per seed | turns (unsolved = budget) | "
    "turns to solve | wall time (s) |\n|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    names = list(CONFIGS) if "all" in args.only else list(dict.fromkeys(n for g in args.only for n in GROUPS[g]))
    out_dir = args.results_dir / args.tag
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {}
    t0 = time.perf_counter()
    jobs = [(name, seed) for name in names for seed in args.seeds]
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        summaries = list(pool.map(lambda job: run_one(args, job[0], job[1], out_dir), jobs))
    for (name, _seed), summary in zip(jobs, summaries, strict=True):
        results.setdefault(name, []).append(summary)

    any_run = next(iter(results.values()))[0]
    rargs = any_run["args"]
    lines = [
        f"# Learning evidence ({args.tag})",
        "",
        f"Env `{rargs['env_id']}`; {rargs['iterations']} iterations x {rargs['episodes_per_iter']} "
        f"episodes per run; held-out evaluation on {rargs['eval_episodes']} env seeds from "
        f"{rargs['eval_seed_start']}, greedy decoding; recipe seeds {args.seeds}. "
        f"Total wall time {time.perf_counter() - t0:.0f} s (reused runs count 0).",
        "",
        "## Trained vs random vs oracle",
        "",
        "| policy | held-out success | mean turns | turns to solve |",
        "|---|---|---|---|",
    ]
    base = any_run["eval"]
    if "rebn_g0.9" in results:
        runs = results["rebn_g0.9"]
        tr = [r["eval"]["trained"] for r in runs]
        lines.append(
            f"| trained (ReBN, γ=0.9; {len(runs)} seeds) | {mean_std([t['success_rate'] for t in tr])} | "
            f"{mean_std([t['mean_turns'] for t in tr])} | {mean_std([t['turns_to_solve'] for t in tr])} |"
        )
        un = [r["eval"]["untrained"] for r in runs]
        lines.append(f"| untrained model | {mean_std([u['success_rate'] for u in un])} | {mean_std([u['mean_turns'] for u in un])} | – |")
    for pol in ("random", "oracle"):
        b = base[pol]
        lines.append(f"| {pol} | {b['success_rate']:.3f} | {b['mean_turns']:.2f} | {b['turns_to_solve']:.2f} |")
    for group, title in TITLES.items():
        present = [n for n in GROUPS[group] if n in results]
        if len(present) < 2:
            continue
        lines += ["", f"## {title}", "", HEADER]
        lines += [config_row(n, results[n]) for n in present]
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    (args.results_dir / f"{args.tag}.md").write_text(report)
    (args.results_dir / f"{args.tag}.json").write_text(
        json.dumps({n: [{"eval": r["eval"], "args": r["args"], "turn_budget": r.get("turn_budget"), "wall_time_s": r["wall_time_s"]} for r in rs] for n, rs in results.items()}, indent=2)
    )
    print(f"wrote {args.results_dir / f'{args.tag}.md'}")


if __name__ == "__main__":
    main()
