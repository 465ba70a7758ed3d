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
one figure per comparison (``<tag>-<group>.png``: success and turns over iterations, mean ±
one std over seeds) is written beside them. With ``--write-doc benchmarks/LEARNING.md`` each
table also replaces its marked block there (``<!-- learning_evidence TAG GROUP -->`` ...
``<!-- /learning_evidence -->``; the reading around it is written by hand) and each figure
is copied to ``benchmarks/figures/TAG-GROUP.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
import shutil
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
# The negative-reward setting: the easy game with penalties, so that returns can be below 0
# and plain REINFORCE's missing baseline can cost it: a repeated or out-of-range guess pays
# -0.2 (no state change), and a malformed answer pays the env's format penalty (-0.1) and
# may be retried within the turn budget instead of ending the episode.
NEGATIVE = ["--format-error", "retry", "--env-kwargs", '{"invalid_penalty": -0.2}']
for _name in [n for n in CONFIGS if n != "rebn_g1.0"]:
    CONFIGS[f"neg_{_name}"] = [*CONFIGS[_name], *NEGATIVE]
for _name in [n for n in CONFIGS if not n.startswith("neg_")]:
    CONFIGS[f"slack_{_name}"] = [*CONFIGS[_name], *SLACK]
GROUPS = {
    "gamma": ["rebn_g0.9", "rebn_g1.0"],
    "estimators": ["rebn_g0.9", "grpo_g0.9", "reinforce_g0.9", "ppo_g0.9"],
    "slack_gamma": ["slack_rebn_g0.9", "slack_rebn_g1.0"],
    "slack_estimators": ["slack_rebn_g0.9", "slack_grpo_g0.9", "slack_reinforce_g0.9", "slack_ppo_g0.9"],
    "negative": ["neg_rebn_g0.9", "neg_reinforce_g0.9", "neg_grpo_g0.9", "neg_ppo_g0.9"],
}
TITLES = {
    "gamma": "Discount: γ = 0.9 vs γ = 1.0 (ReBN)",
    "estimators": "Estimators, same budget (γ = 0.9)",
    "slack_gamma": "Discount with slack (1-10 in 10 turns): γ = 0.9 vs γ = 1.0 (ReBN)",
    "slack_estimators": "Estimators with slack (1-10 in 10 turns), same budget (γ = 0.9)",
    "negative": "Negative rewards (invalid guess -0.2, format error -0.1 and retry), same budget (γ = 0.9)",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="recipe seeds per configuration")
    p.add_argument("--only", choices=["all", *GROUPS], nargs="+", default=["all"], help="which comparisons to run")
    p.add_argument("--configs", choices=list(CONFIGS), nargs="+", default=None, help="run only these configurations (of the chosen groups); the report still shows every run of the tag")
    p.add_argument("--iterations", type=int, default=None, help="override the recipe's --iterations (reduced budget)")
    p.add_argument("--episodes-per-iter", type=int, default=None, help="override the recipe's --episodes-per-iter")
    p.add_argument("--eval-episodes", type=int, default=200, help="held-out evaluation episodes per run")
    p.add_argument("--tag", default="default", help="name of this experiment's results folder")
    p.add_argument("--results-dir", type=Path, default=REPO / "benchmarks" / "results" / "learning")
    p.add_argument("--force", action="store_true", help="rerun runs that already have a summary.json")
    p.add_argument("--python", default=sys.executable, help="interpreter for the recipe")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (each gets --threads 1 when > 1)")
    p.add_argument("--write-doc", type=Path, default=None, metavar="MD",
                   help="also write each comparison's table into this Markdown file, between its markers "
                   "'<!-- learning_evidence TAG GROUP -->' and '<!-- /learning_evidence -->', and copy "
                   "its figure to figures/TAG-GROUP.png beside the file (e.g. benchmarks/LEARNING.md)")
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
        f"{mean_std([late_training(r, 'charts/success_rate') for r in runs])} | "
        f"{mean_std([late_training(r, 'charts/mean_turns') for r in runs])} | "
        f"{mean_std([r['wall_time_s'] for r in runs])} |"
    )


LATE_ITERATIONS = 20


def late_training(run: dict[str, Any], column: str, last: int = LATE_ITERATIONS) -> float | None:
    """Mean of a training-batch column (sampled episodes) over the run's last iterations."""
    values = [v for v in run.get("curve", {}).get(column, [])[-last:] if math.isfinite(v)]
    return statistics.mean(values) if values else None


def collect_results(out_dir: Path, names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each configuration's finished runs under ``out_dir`` (by seed), with their metrics."""
    results: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        paths = sorted(out_dir.glob(f"{name}__s*/summary.json"), key=lambda p: int(p.parent.name.rsplit("__s", 1)[1]))
        for path in paths:
            summary = json.loads(path.read_text())
            summary["curve"] = read_curve(path.parent / "metrics.csv")
            results.setdefault(name, []).append(summary)
    return results


def read_curve(path: Path) -> dict[str, list[float]]:
    """The per-iteration columns of a run's metrics.csv (empty cells as NaN)."""
    if not path.is_file():
        return {}
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return {k: [float(r[k]) if r[k] not in ("", None) else math.nan for r in rows] for k in rows[0]} if rows else {}


def smooth(values: list[float], window: int) -> list[float]:
    """Trailing moving average over ``window`` iterations (NaNs skipped)."""
    out = []
    for i in range(len(values)):
        part = [v for v in values[max(0, i - window + 1) : i + 1] if math.isfinite(v)]
        out.append(statistics.mean(part) if part else math.nan)
    return out


def band(curves: list[list[float]]) -> tuple[list[float], list[float], list[float]]:
    """Mean and mean -/+ one std across seeds, iteration by iteration (up to the shortest run)."""
    n = min(len(c) for c in curves)
    mean, lo, hi = [], [], []
    for i in range(n):
        vals = [c[i] for c in curves if math.isfinite(c[i])]
        m = statistics.mean(vals) if vals else math.nan
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        mean.append(m), lo.append(m - sd), hi.append(m + sd)
    return mean, lo, hi


def write_figures(results_dir: Path, tag: str, results: dict[str, list[dict[str, Any]]], window: int = 10) -> dict[str, Path]:
    """One figure per comparison group with at least two configurations: sampled success and
    mean turns over iterations (each seed smoothed over ``window`` iterations, then mean ±
    one std across seeds), with the held-out evaluations (greedy, or sampled with the recipe's
    ``--eval-temperature``) as points with error bars."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'gem-core[rl]'): no figures")
        return {}
    written: dict[str, Path] = {}
    for group, title in TITLES.items():
        present = [n for n in GROUPS[group] if any(r.get("curve") for r in results.get(n, []))]
        if len(present) < 2:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for k, name in enumerate(present):
            runs = [r for r in results[name] if r.get("curve")]
            color = f"C{k}"
            its = runs[0]["curve"]["iteration"]
            for ax, column in zip(axes, ("charts/success_rate", "charts/mean_turns"), strict=True):
                mean, lo, hi = band([smooth(r["curve"][column], window) for r in runs])
                x = its[: len(mean)]
                ax.plot(x, mean, color=color, label=f"{name} ({len(runs)} seeds)")
                ax.fill_between(x, lo, hi, color=color, alpha=0.2)
            evals = [(i, [r["curve"]["eval/success_rate"][j] for r in runs]) for j, i in enumerate(its) if all(j < len(r["curve"]["iteration"]) and math.isfinite(r["curve"]["eval/success_rate"][j]) for r in runs)]
            if evals:
                ys = [statistics.mean(v) for _, v in evals]
                es = [statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in evals]
                shift = (k - (len(present) - 1) / 2) * 0.01 * its[-1]  # side by side, not on top
                axes[0].errorbar([i + shift for i, _ in evals], ys, yerr=es, fmt="o", color=color, capsize=3, markersize=4)
        budget = results[present[0]][0].get("turn_budget")
        held_out = "greedy" if not results[present[0]][0]["args"].get("eval_temperature") else "sampled"
        axes[0].set(xlabel="iteration", ylabel="success rate", title=f"success (line: sampled, training; points: held-out {held_out})", ylim=(0, 1.02))
        axes[1].set(xlabel="iteration", ylabel="mean turns per episode", title=f"turns (budget {budget})")
        axes[0].legend(fontsize=8, loc="lower right")
        fig.suptitle(f"{title} — {tag}, mean ± 1 std over seeds, {window}-iteration moving average", fontsize=10)
        fig.tight_layout()
        path = results_dir / f"{tag}-{group}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written[group] = path
        print(f"wrote {path}")
    return written


HEADER = (
    "| configuration | seeds | held-out success (mean ± std) | per seed | turns (unsolved = budget) | "
    f"turns to solve | sampled success, last {LATE_ITERATIONS} it. | sampled turns, last {LATE_ITERATIONS} it. "
    "| wall time (s) |\n|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # The report covers every finished run of the tag in the chosen groups (earlier
    # invocations' too), so an experiment can be run in parts; --configs picks what runs now.
    reported = list(CONFIGS) if "all" in args.only else list(dict.fromkeys(n for g in args.only for n in GROUPS[g]))
    names = reported if args.configs is None else [n for n in reported if n in args.configs]
    out_dir = args.results_dir / args.tag
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    jobs = [(name, seed) for name in names for seed in args.seeds]
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        list(pool.map(lambda job: run_one(args, job[0], job[1], out_dir), jobs))
    results = collect_results(out_dir, reported)
    if not results:
        raise SystemExit(f"no finished run under {out_dir}")

    any_run = next(iter(results.values()))[0]
    rargs = any_run["args"]
    temperature = rargs.get("eval_temperature") or 0.0
    decoding = "greedy decoding" if temperature == 0 else f"sampling at temperature {temperature:g}"
    lines = [
        f"# Learning evidence ({args.tag})",
        "",
        f"Env `{rargs['env_id']}`; {rargs['iterations']} iterations x {rargs['episodes_per_iter']} "
        f"episodes per run; held-out evaluation on {rargs['eval_episodes']} env seeds from "
        f"{rargs['eval_seed_start']}, "
        f"{decoding}; "
        f"recipe seeds {args.seeds}. "
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
    tables: dict[str, str] = {}
    for group, title in TITLES.items():
        present = [n for n in GROUPS[group] if n in results]
        if len(present) < 2:
            continue
        tables[group] = "\n".join([HEADER, *(config_row(n, results[n]) for n in present)])
        lines += ["", f"## {title}", "", tables[group]]
    figures = write_figures(args.results_dir, args.tag, results)
    if figures:
        lines += ["", "## Figures", ""] + [f"![{group}]({path.name})" for group, path in figures.items()]
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    (args.results_dir / f"{args.tag}.md").write_text(report)
    (args.results_dir / f"{args.tag}.json").write_text(
        json.dumps({n: [{"run_name": r["run_name"], "eval": r["eval"], "args": r["args"], "turn_budget": r.get("turn_budget"), "wall_time_s": r["wall_time_s"]} for r in rs] for n, rs in results.items()}, indent=2)
    )
    print(f"wrote {args.results_dir / f'{args.tag}.md'}")
    if args.write_doc is not None:
        write_doc(args.write_doc, args.tag, tables, figures)


MARK_END = "<!-- /learning_evidence -->"


def write_doc(doc: Path, tag: str, tables: dict[str, str], figures: dict[str, Path]) -> None:
    """Replace each ``<!-- learning_evidence TAG GROUP -->`` ... ``MARK_END`` block of ``doc``
    with that group's table (the text around the markers, the reading, is left alone) and
    copy the group's figure to ``figures/TAG-GROUP.png`` beside ``doc``."""
    text = doc.read_text()
    for group, table in tables.items():
        begin = f"<!-- learning_evidence {tag} {group} -->"
        start = text.find(begin)
        if start < 0:
            continue
        end = text.find(MARK_END, start)
        if end < 0:
            raise SystemExit(f"{doc}: {begin} has no {MARK_END} after it")
        text = f"{text[:start]}{begin}\n{table}\n{text[end:]}"
        print(f"{doc}: wrote the {group} table of {tag}")
    doc.write_text(text)
    for group, path in figures.items():
        target = doc.parent / "figures" / f"{tag}-{group}.png"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, target)
        print(f"copied {path.name} to {target}")


if __name__ == "__main__":
    main()
