"""`report`: compare `gem eval` runs: success with 95% intervals and turns-to-solve plots, plus Markdown."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gem_core.errors import DependencyNotInstalled, InvalidArgument
from gem_core.eval.records import load_run
from gem_core.eval.stats import summarize, summary_markdown

__all__ = ["report", "REPORT_MD", "SUCCESS_PNG", "TURNS_PNG"]

REPORT_MD = "report.md"
SUCCESS_PNG = "success.png"
TURNS_PNG = "turns_to_solve.png"


def _label(run_dir: Path, manifest: dict[str, Any], taken: set[str]) -> str:
    base = f"{manifest.get('config', {}).get('model', '?')} ({run_dir.name})"
    label, k = base, 2
    while label in taken:
        label, k = f"{base} #{k}", k + 1
    taken.add(label)
    return label


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise DependencyNotInstalled("matplotlib", extra="eval", purpose="the plots of `gem report`") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def report(
    run_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    plots: bool = True,
) -> dict[str, Any]:
    """Compare runs: write ``report.md`` and (with ``plots``) two PNGs into ``out_dir``.

    ``success.png``: success rate per env, one bar per run, with 95% Wilson interval
    bars. ``turns_to_solve.png``: per env, the distribution of turns in solved episodes
    (bars side by side, one per run). The summary is recomputed from each run's records,
    so a partial run reports what it has.

    Args:
        run_dirs: one or more ``gem eval --out`` directories.
        out_dir: where to write (default: the run directory when there is one run, else
            ``./gem-report``).
        plots: draw the PNGs (needs matplotlib: ``pip install "gem-core[eval]"``).

    Returns:
        ``{"markdown": path, "plots": [paths], "runs": [{label, dir, summary}]}``.

    Raises:
        InvalidArgument: a directory is not a gem eval run.
        DependencyNotInstalled: ``plots`` and matplotlib is missing (the Markdown
            report is written first).
    """
    dirs = [Path(run_dirs)] if isinstance(run_dirs, (str, os.PathLike)) else [Path(d) for d in run_dirs]
    if not dirs:
        raise InvalidArgument("report needs at least one run directory, got none")
    out = Path(out_dir) if out_dir is not None else (dirs[0] if len(dirs) == 1 else Path("gem-report"))
    runs = []
    taken: set[str] = set()
    for d in dirs:
        manifest, records = load_run(d)
        runs.append({"label": _label(d, manifest, taken), "dir": str(d), "manifest": manifest,
                     "records": records, "summary": summarize(records)})
    env_ids: list[str] = []
    for r in runs:
        for e in list(r["manifest"].get("config", {}).get("env_ids", [])) + list(r["summary"]):
            if e not in env_ids:
                env_ids.append(e)

    out.mkdir(parents=True, exist_ok=True)
    lines = ["# GEM evaluation report", ""]
    for r in runs:
        m = r["manifest"]
        cfg = m.get("config", {})
        counts = m.get("counts", {})
        lines += [
            f"## {r['label']}",
            "",
            f"- run: `{r['dir']}` (status: {m.get('status', '?')}, "
            f"{len(r['records'])}/{counts.get('wanted', '?')} episodes)",
            f"- endpoint: {m.get('endpoint', {}).get('base_url')} "
            f"({m.get('endpoint', {}).get('api', 'completions')} API), model `{cfg.get('model')}`, "
            f"temperature {cfg.get('temperature')}, top_p {cfg.get('top_p')}, "
            f"max tokens {cfg.get('max_tokens')}, seed {cfg.get('seed')}",
            f"- tools: {', '.join(cfg.get('tools') or []) or 'none'}; wrappers: "
            f"{', '.join(cfg.get('wrappers') or []) or 'none'}; gem-core {m.get('gem_core_version')}",
            "",
            summary_markdown(r["summary"]) if r["summary"] else "(no finished episodes)",
            "",
        ]
    if len(runs) > 1:
        lines += ["## Success rate by env", "", "| env | " + " | ".join(r["label"] for r in runs) + " |",
                  "|---|" + "---|" * len(runs)]
        for e in env_ids:
            cells = []
            for r in runs:
                row = r["summary"].get(e)
                cells.append("-" if row is None else
                             f"{row['success_rate']:.3f} [{row['ci95_low']:.3f}, {row['ci95_high']:.3f}]")
            lines.append(f"| {e} | " + " | ".join(cells) + " |")
        lines.append("")
    pngs = [SUCCESS_PNG, TURNS_PNG] if plots else []
    if pngs:
        lines += ["## Plots", "", f"![success]({SUCCESS_PNG})", "", f"![turns to solve]({TURNS_PNG})", ""]
    md_path = out / REPORT_MD
    md_path.write_text("\n".join(lines), encoding="utf-8")
    written: list[str] = []
    if plots:
        plt = _pyplot()
        written.append(str(_plot_success(plt, runs, env_ids, out / SUCCESS_PNG)))
        written.append(str(_plot_turns(plt, runs, env_ids, out / TURNS_PNG)))
    return {"markdown": str(md_path), "plots": written,
            "runs": [{k: r[k] for k in ("label", "dir", "summary")} for r in runs]}


def _plot_success(plt: Any, runs: list[dict[str, Any]], env_ids: list[str], path: Path) -> Path:
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(env_ids) * max(1, len(runs)) + 2), 4.5))
    for k, r in enumerate(runs):
        xs, ys, lo, hi = [], [], [], []
        for j, e in enumerate(env_ids):
            row = r["summary"].get(e)
            if row is None:
                continue
            xs.append(j + (k - (len(runs) - 1) / 2) * width)
            ys.append(row["success_rate"])
            lo.append(row["success_rate"] - row["ci95_low"])
            hi.append(row["ci95_high"] - row["success_rate"])
        ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, label=r["label"])
    ax.set_xticks(range(len(env_ids)))
    ax.set_xticklabels(env_ids, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate (95% Wilson interval)")
    ax.set_title("Success per env")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_turns(plt: Any, runs: list[dict[str, Any]], env_ids: list[str], path: Path) -> Path:
    n = len(env_ids)
    fig, axes = plt.subplots(1, n, figsize=(max(4.0, 3.5 * n), 3.5), squeeze=False)
    width = 0.8 / len(runs)
    for ax, e in zip(axes[0], env_ids, strict=True):
        longest = 1
        for k, r in enumerate(runs):
            turns = [int(x["num_turns"]) for x in r["records"] if x["env_id"] == e and x.get("success")]
            if not turns:
                continue
            longest = max(longest, max(turns))
            counts = {t: turns.count(t) for t in sorted(set(turns))}
            offset = (k - (len(runs) - 1) / 2) * width
            ax.bar([t + offset for t in counts], list(counts.values()), width=width,
                   label=f"{r['label']} (n={len(turns)})")
        ax.set_xticks(range(1, longest + 1))
        ax.set_xlim(0.4, longest + 0.6)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_title(e, fontsize=9)
        ax.set_xlabel("turns to solve")
        ax.set_ylabel("solved episodes")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no solved episodes", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
