"""`report`: compare `gem eval` runs: success with 95% intervals and turns-to-solve plots, plus Markdown."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gem_core.errors import DependencyNotInstalled, InvalidArgument
from gem_core.eval.records import load_run, write_text
from gem_core.eval.stats import summarize, summary_markdown

__all__ = ["report", "REPORT_MD", "SUCCESS_PNG", "TURNS_PNG"]

REPORT_MD = "report.md"
SUCCESS_PNG = "success.png"
TURNS_PNG = "turns_to_solve.png"


def _labels(dirs: list[Path], manifests: list[dict[str, Any]]) -> list[str]:
    """Short run labels: the model's last path part (``Qwen/Qwen3-1.7B`` -> ``Qwen3-1.7B``),
    with the run directory's name added only where two runs share a model."""
    short = [str(m.get("config", {}).get("model") or "?").rstrip("/").rsplit("/", 1)[-1] for m in manifests]
    labels = [f"{s} ({d.name})" if short.count(s) > 1 else s for s, d in zip(short, dirs, strict=True)]
    taken: set[str] = set()
    out = []
    for label in labels:
        base, k = label, 2
        while label in taken:
            label, k = f"{base} #{k}", k + 1
        taken.add(label)
        out.append(label)
    return out


def _num(x: Any) -> str:
    """A setting for display: floats rounded (0.7000000000000001 -> 0.7)."""
    return format(x, ".4g") if isinstance(x, float) else str(x)


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
    loaded = [load_run(d) for d in dirs]
    labels = _labels(dirs, [m for m, _ in loaded])
    runs = [{"label": label, "dir": str(d), "manifest": manifest, "records": records,
             "summary": summarize(records)}
            for label, d, (manifest, records) in zip(labels, dirs, loaded, strict=True)]
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
        errored = sum(1 for x in r["records"] if x.get("error"))
        lines += [
            f"## {r['label']}",
            "",
            f"- run: `{r['dir']}` (status: {m.get('status', '?')}, "
            f"{len(r['records'])}/{counts.get('wanted', '?')} episodes recorded, {errored} errored)",
            f"- endpoint: {m.get('endpoint', {}).get('base_url')} "
            f"({m.get('endpoint', {}).get('api', 'completions')} API), model `{cfg.get('model')}`, "
            f"temperature {_num(cfg.get('temperature'))}, top_p {_num(cfg.get('top_p'))}, "
            f"max tokens {cfg.get('max_tokens')}, seed {cfg.get('seed')}"
            + (f", extra body `{json.dumps(cfg['extra_body'])}`" if cfg.get("extra_body") else ""),
            f"- env_kwargs: `{json.dumps(cfg.get('env_kwargs') or {}, sort_keys=True, default=str)}`; "
            f"data: {_data_line(m)}",
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
                if row is None or row["success_rate"] is None:
                    cells.append("-" if row is None else f"- ({row['errors']} errored)")
                else:
                    cells.append(f"{row['success_rate']:.3f} [{row['ci95_low']:.3f}, {row['ci95_high']:.3f}]"
                                 + (f" ({row['errors']} errored)" if row["errors"] else ""))
            lines.append(f"| {e} | " + " | ".join(cells) + " |")
        lines.append("")
    pngs = [SUCCESS_PNG, TURNS_PNG] if plots else []
    if pngs:
        lines += ["## Plots", "", f"![success]({SUCCESS_PNG})", "", f"![turns to solve]({TURNS_PNG})", ""]
    md_path = out / REPORT_MD
    write_text(md_path, "\n".join(lines))
    written: list[str] = []
    if plots:
        plt = _pyplot()
        written.append(str(_plot_success(plt, runs, env_ids, out / SUCCESS_PNG)))
        written.append(str(_plot_turns(plt, runs, env_ids, out / TURNS_PNG)))
    return {"markdown": str(md_path), "plots": written,
            "runs": [{k: r[k] for k in ("label", "dir", "summary")} for r in runs]}


def _data_line(manifest: dict[str, Any]) -> str:
    data_env = manifest.get("data_env") or {}
    parts = [f"{k}={v}" for k, v in data_env.items() if k in ("GEM_DATA", "GEM_DATA_DIR") and v]
    for env_id, loads in (manifest.get("data") or {}).items():
        for d in loads:
            parts.append(f"{env_id}: {d.get('rows')} rows, sha256 {str(d.get('sha256'))[:12]}")
    return "; ".join(parts) or "no dataset-backed env"


def _plot_success(plt: Any, runs: list[dict[str, Any]], env_ids: list[str], path: Path) -> Path:
    """Success per env, one bar per run, with 95% intervals and each bar's k/n on top.

    A rate of 0 is drawn as a visible stub in the run's colour (not an invisible
    zero-height bar whose legend colour points at nothing); an env a run measured
    nothing on (every episode errored, or absent) gets "n/a" instead of a bar.
    """
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(env_ids) * max(1, len(runs)) + 2), 4.5))
    from matplotlib.patches import Patch

    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    handles = []
    for k, r in enumerate(runs):
        color = colors[k % len(colors)]
        xs, ys, lo, hi, notes = [], [], [], [], []
        for j, e in enumerate(env_ids):
            row = r["summary"].get(e)
            x = j + (k - (len(runs) - 1) / 2) * width
            if row is None:
                continue
            if row["success_rate"] is None:
                ax.text(x, 0.02, "n/a (errored)", ha="center", va="bottom", fontsize=7, color=color,
                        rotation=90)
                continue
            xs.append(x)
            ys.append(max(row["success_rate"], 0.008))  # a 0 stays visible as a stub
            lo.append(row["success_rate"] - row["ci95_low"] + (ys[-1] - row["success_rate"]))
            hi.append(row["ci95_high"] - row["success_rate"])
            notes.append((x, row["ci95_high"], f"{row['successes']}/{row['measured']}"))
        if xs:
            ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, color=color, edgecolor=color)
        handles.append(Patch(facecolor=color, label=r["label"] if xs else f"{r['label']} (nothing measured)"))
        for x, top, text in notes:
            ax.text(x, min(top + 0.02, 1.02), text, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(env_ids)))
    ax.set_xticklabels(env_ids, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("success rate (95% Wilson interval)")
    ax.set_title("Success per env (over measured episodes)")
    ax.legend(handles=handles, fontsize=8)
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
