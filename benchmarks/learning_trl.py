"""Learning through TRL: does ``recipes/trl_rebn.py --model tiny`` learn GuessTheNumber-easy?

Runs the recipe once per seed (``--jobs`` at a time, one torch thread each, in TRL's venv),
each with a held-out greedy evaluation every ``--eval-every`` steps, stopping at
``--target`` held-out success or after ``--budget-s`` seconds, then prints one table row
per seed (held-out success, steps, time to the target, wall time) and writes it to
``benchmarks/results/learning/trl-<tag>.md``. Runs land in
``benchmarks/results/learning/trl-<tag>/seed<N>/`` (gitignored); a seed whose
``summary.json`` exists is reused (``--force`` reruns it). A figure of every seed's held-out
curve, over TRL steps and over wall time, goes to ``trl-<tag>.png`` beside the table
(``--figure PATH`` copies it, e.g. to ``benchmarks/figures/``). The figures of record are
copied by hand into ``benchmarks/LEARNING.md`` (section "Learning through TRL").

Launch::

    ~/.cache/gem/venv-trl/bin/python benchmarks/learning_trl.py --seeds 1 2 3 4 5 --jobs 2
    ... learning_trl.py --seeds 1 --budget-s 300 -- --max_steps 100   # recipe flags after --
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "trl_rebn.py"
RESULTS = REPO / "benchmarks" / "results" / "learning"


def run_seed(seed: int, out: Path, args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    """Run the recipe for one seed (or reuse its summary)."""
    run_dir = out / f"seed{seed}"
    summary = run_dir / "summary.json"
    if summary.is_file() and not args.force:
        return json.loads(summary.read_text())
    cmd = [
        sys.executable, str(RECIPE), "--model", "tiny", "--seed", str(seed), "--threads", str(args.threads),
        "--output_dir", str(out), "--run_name", f"seed{seed}", "--eval_every", str(args.eval_every),
        "--stop_at_success", str(args.target), "--max_wall_s", str(args.budget_s), "--disable_tqdm", "true", *extra,
    ]  # fmt: skip
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(run_dir / "log.txt", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0 or not summary.is_file():
        raise SystemExit(f"seed {seed}: the recipe failed (exit {rc}); see {run_dir / 'log.txt'}")
    print(f"seed {seed} done in {time.perf_counter() - start:.0f} s", flush=True)
    return json.loads(summary.read_text())


def table(rows: list[tuple[int, dict[str, Any]]], target: float) -> str:
    """The per-seed Markdown table."""
    lines = [
        f"| seed | held-out success (greedy) | reached ≥ {target:.2f} | TRL steps | time to target (s) | wall time (s) | mean turns | turns to solve |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for seed, s in rows:
        t = s["eval"]["trained"]
        ttt = s.get("time_to_target_s")
        lines.append(
            f"| {seed} | {t['success_rate']:.3f} | {'yes' if t['success_rate'] >= target else 'no'} | {s['steps']} | "
            f"{'–' if ttt is None else f'{ttt:.0f}'} | {s['wall_time_s']:.0f} | {t['mean_turns']:.2f} | {t['turns_to_solve']:.2f} |"
        )
    first = rows[0][1]["eval"] if rows else None
    if first:
        lines.append("")
        lines.append(
            f"Same held-out seeds: random policy {first['random']['success_rate']:.3f}, oracle "
            f"{first['oracle']['success_rate']:.3f}; warmed-up model "
            + ", ".join(f"{s['eval'].get('warmed_up', {}).get('success_rate', float('nan')):.3f}" for _, s in rows)
        )
    return "\n".join(lines)


def figure(rows: list[tuple[int, dict[str, Any]]], path: Path, target: float, budget_s: float) -> bool:
    """Each seed's held-out success over TRL steps and over wall time, as a PNG; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure")
        return False
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for seed, s in rows:
        start = s["eval"].get("warmed_up", s["eval"].get("untrained", {})).get("success_rate")
        evals = s.get("evals", [])
        steps = [0] + [e["step"] for e in evals]
        times = [0.0] + [e["time_s"] for e in evals]
        success = [start] + [e["success_rate"] for e in evals]
        (line,) = by_step.plot(steps, success, "o-", ms=3, label=f"seed {seed}")
        by_time.plot(times, success, "o-", ms=3, color=line.get_color())
    random_rate = rows[0][1]["eval"]["random"]["success_rate"] if rows else None
    for ax in (by_step, by_time):
        ax.axhline(target, color="green", ls=":", label=f"target {target:g}")
        if random_rate is not None:
            ax.axhline(random_rate, color="gray", ls="--", label="random policy")
        ax.set_ylim(-0.02, 1.02)
    by_time.axvline(budget_s, color="red", ls=":", label=f"budget {budget_s:g} s")
    by_step.set(xlabel="TRL step", ylabel="held-out success (greedy)")
    by_time.set(xlabel="wall time (s), warm-up and evaluations included")
    by_step.set_title("TRL GRPOTrainer + gem-trl ReBN, GuessTheNumber-easy", fontsize=10)
    by_step.legend(fontsize=8, loc="upper left")
    by_time.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--jobs", type=int, default=1, help="runs at a time")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--tag", default="v1")
    p.add_argument("--target", type=float, default=0.9, help="held-out success that stops a run")
    p.add_argument("--budget-s", type=float, default=900.0, help="wall-time budget of a run (training stops after it)")
    p.add_argument("--eval-every", type=int, default=50, help="held-out evaluation every N TRL steps")
    p.add_argument("--force", action="store_true")
    p.add_argument("--figure", type=Path, help="also copy the figure here (e.g. benchmarks/figures/trl-TAG.png)")
    args = p.parse_args(argv)
    out = RESULTS / f"trl-{args.tag}"
    out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        summaries = list(pool.map(lambda s: (s, run_seed(s, out, args, extra)), args.seeds))
    text = table(summaries, args.target)
    (RESULTS / f"trl-{args.tag}.md").write_text(text + "\n")
    print(text)
    png = RESULTS / f"trl-{args.tag}.png"
    if figure(summaries, png, args.target, args.budget_s):
        print(f"figure: {png}")
        if args.figure:
            args.figure.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, args.figure)
            print(f"copied to {args.figure}")


if __name__ == "__main__":
    main()
