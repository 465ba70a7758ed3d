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

__all__ = ["report", "REPORT_MD", "SUCCESS_PNG", "TURNS_PNG", "USERS_PNG"]

REPORT_MD = "report.md"
SUCCESS_PNG = "success.png"
TURNS_PNG = "turns_to_solve.png"
#: Assistant success per user simulator (written when a run played opposite one).
USERS_PNG = "success_by_user.png"


def _labels(dirs: list[Path], manifests: list[dict[str, Any]]) -> list[str]:
    """Short run labels: the model's last path part (``Qwen/Qwen3-1.7B`` -> ``Qwen3-1.7B``);
    where two runs share a model, the user simulator that tells them apart (``A vs B``),
    else the run directory's name."""
    from gem_core.eval.user_sim import user_label

    short = [str(m.get("config", {}).get("model") or "?").rstrip("/").rsplit("/", 1)[-1] for m in manifests]
    users = [user_label(m.get("user_simulator")) if isinstance(m.get("user_simulator"), dict) else None
             for m in manifests]
    labels = []
    for s, u, d in zip(short, users, dirs, strict=True):
        if short.count(s) == 1:
            labels.append(s)
        elif u is not None and sum(1 for s2, u2 in zip(short, users, strict=True) if (s2, u2) == (s, u)) == 1:
            labels.append(f"{s} vs {u}")  # runs of one model apart by their user simulator
        else:
            labels.append(f"{s} ({d.name})")
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

    Runs played opposite a user simulator (``tau:*``; the manifest's ``user_simulator``)
    are also compared across user simulators, per env: one row per assistant model, one
    column per user simulator (its model, with the differing sampling settings where two
    share a model; ``scripted`` for the env's scripted user), each cell the assistant's
    success with its 95% Wilson interval and successes/measured — in ``report.md`` and,
    with ``plots``, in ``success_by_user.png``. Two runs of one assistant model against
    one user simulator get a row each (labelled with the run directory), never pooled.

    Args:
        run_dirs: one or more ``gem eval --out`` directories.
        out_dir: where to write (default: the run directory when there is one run, else
            ``./gem-report``).
        plots: draw the PNGs (needs matplotlib: ``pip install "gem-core[eval]"``).

    Returns:
        ``{"markdown": path, "plots": [paths], "runs": [{label, dir, summary}],
        "by_user": {env_id: {"columns": [labels], "rows": {assistant label: {column
        label: summary row}}}}}`` (``by_user`` empty when no run had a user simulator).

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
            *([f"- user simulator: {_user_line(m['user_simulator'])}"] if m.get("user_simulator") else []),
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
    by_user = _by_user(runs, env_ids)
    if by_user:
        lines += _by_user_markdown(by_user)
    pngs = [SUCCESS_PNG, TURNS_PNG] if plots else []
    if pngs:
        lines += ["## Plots", "", f"![success]({SUCCESS_PNG})", "", f"![turns to solve]({TURNS_PNG})", ""]
        if by_user:
            lines += [f"![success by user simulator]({USERS_PNG})", ""]
    md_path = out / REPORT_MD
    write_text(md_path, "\n".join(lines))
    written: list[str] = []
    if plots:
        plt = _pyplot()
        written.append(str(_plot_success(plt, runs, env_ids, out / SUCCESS_PNG)))
        written.append(str(_plot_turns(plt, runs, env_ids, out / TURNS_PNG)))
        if by_user:
            written.append(str(_plot_by_user(plt, by_user, out / USERS_PNG)))
    return {"markdown": str(md_path), "plots": written,
            "runs": [{k: r[k] for k in ("label", "dir", "summary")} for r in runs],
            "by_user": {e: {"columns": t["columns"],
                            "rows": {label: dict(cells) for label, cells in t["rows"].items()}}
                        for e, t in by_user.items()}}


def _short(model: Any) -> str:
    return str(model or "?").rstrip("/").rsplit("/", 1)[-1]


def _user_line(u: dict[str, Any]) -> str:
    """One run's user simulator for its section of report.md."""
    if u.get("kind") != "llm":
        return f"{u.get('kind')}" + (" (the env's default)" if u.get("default") else "")
    return (f"model `{u.get('model')}` at {u.get('base_url')}, temperature {_num(u.get('temperature'))}, "
            f"top_p {_num(u.get('top_p'))}, max tokens {u.get('max_tokens')}"
            + (f", extra body `{json.dumps(u['extra_body'])}`" if u.get("extra_body") else ""))


def _user_key(u: dict[str, Any]) -> dict[str, Any]:
    """What makes two user simulators the same column (where they were served does not)."""
    return {k: v for k, v in u.items()
            if k not in ("base_url", "timeout", "max_retries", "route", "api_key", "default")}


def _user_columns(specs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``{column key: label}``: the user model's short name; where two differ only in
    settings, the differing settings are added (``B (temperature=1)``)."""
    from gem_core.eval.user_sim import user_label

    base = {k: user_label(s) for k, s in specs.items()}
    labels = {}
    for key, label in base.items():
        same = [k for k, other in base.items() if other == label]
        if len(same) > 1:
            mine = _user_key(specs[key])
            fields = sorted({f for k in same for f in set(_user_key(specs[k])) | set(mine)
                             if _user_key(specs[k]).get(f) != mine.get(f)} - {"model"})
            label += " (" + ", ".join(f"{f}={_num(mine.get(f))}" for f in fields) + ")"
        labels[key] = label
    return labels


def _by_user(runs: list[dict[str, Any]], env_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{env_id: {"columns": [labels], "rows": {assistant label: {column label: row}}}}``
    over the runs that played opposite a user simulator."""
    with_user = [r for r in runs if isinstance(r["manifest"].get("user_simulator"), dict)]
    if not with_user:
        return {}
    specs: dict[str, dict[str, Any]] = {}
    for r in with_user:
        key = json.dumps(_user_key(r["manifest"]["user_simulator"]), sort_keys=True, default=str)
        r["_user_col"] = key
        specs.setdefault(key, r["manifest"]["user_simulator"])
    col_label = _user_columns(specs)
    out: dict[str, dict[str, Any]] = {}
    for e in env_ids:
        rows: dict[str, dict[str, Any]] = {}
        models: dict[str, str] = {}  # row label -> assistant model
        columns: list[str] = []
        for r in with_user:
            row = r["summary"].get(e)
            if row is None:
                continue
            model, col = _short(r["manifest"].get("config", {}).get("model")), col_label[r["_user_col"]]
            label = next((lb for lb, m in models.items() if m == model and col not in rows[lb]), None)
            if label is None:
                label = model if model not in models.values() else f"{model} ({Path(r['dir']).name})"
                while label in rows:
                    label += "'"
                rows[label], models[label] = {}, model
            rows[label][col] = row
            if col not in columns:
                columns.append(col)
        if rows:
            out[e] = {"columns": columns, "rows": rows}
    for r in with_user:
        r.pop("_user_col", None)
    return out


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if row["success_rate"] is None:
        return f"- ({row['errors']} errored)"
    return (f"{row['success_rate']:.3f} [{row['ci95_low']:.3f}, {row['ci95_high']:.3f}] "
            f"({row['successes']}/{row['measured']})" + (f", {row['errors']} errored" if row["errors"] else ""))


def _by_user_markdown(by_user: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["## Assistant success by user simulator", "",
             "Rows: assistant model; columns: user-simulator model. Each cell: success over "
             "the measured episodes, [95% Wilson interval], (successes/measured).", ""]
    for e, table in by_user.items():
        cols = table["columns"]
        lines += [f"### {e}", "", "| assistant \\ user | " + " | ".join(cols) + " |",
                  "|---|" + "---|" * len(cols)]
        for label, cells in table["rows"].items():
            lines.append(f"| {label} | " + " | ".join(_cell(cells.get(c)) for c in cols) + " |")
        lines.append("")
    return lines


def _plot_by_user(plt: Any, by_user: dict[str, dict[str, Any]], path: Path) -> Path:
    """Per env: one group of bars per assistant model, one bar per user simulator, with
    95% intervals and k/n; a 0 is a visible stub, an unmeasured cell says n/a."""
    n = len(by_user)
    widest = max(len(t["rows"]) * max(1, len(t["columns"])) for t in by_user.values())
    fig, axes = plt.subplots(1, n, figsize=(max(5.0, (1.0 * widest + 2) * n), 4.5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    all_cols = list(dict.fromkeys(c for t in by_user.values() for c in t["columns"]))
    for ax, (e, table) in zip(axes[0], by_user.items(), strict=True):
        cols, rows = table["columns"], list(table["rows"].items())
        width = 0.8 / len(cols)
        for k, col in enumerate(cols):
            color = colors[all_cols.index(col) % len(colors)]
            xs, ys, lo, hi = [], [], [], []
            for j, (_, cells) in enumerate(rows):
                row = cells.get(col)
                x = j + (k - (len(cols) - 1) / 2) * width
                if row is None:
                    continue
                if row["success_rate"] is None:
                    ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=7, color=color, rotation=90)
                    continue
                y = max(row["success_rate"], 0.008)
                xs.append(x)
                ys.append(y)
                lo.append(row["success_rate"] - row["ci95_low"] + (y - row["success_rate"]))
                hi.append(row["ci95_high"] - row["success_rate"])
                ax.text(x, min(row["ci95_high"] + 0.02, 1.02), f"{row['successes']}/{row['measured']}",
                        ha="center", va="bottom", fontsize=7)
            ax.bar(xs, ys, width=width, yerr=[lo, hi] if xs else None, capsize=3, color=color,
                   edgecolor=color, label=f"user: {col}")
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([label for label, _ in rows], rotation=20, ha="right", fontsize=8)
        ax.set_xlim(-0.5, len(rows) - 0.5)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("assistant success (95% Wilson interval)")
        ax.set_title(e, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("Assistant success by user simulator", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


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
        longest, tallest = 1, 0
        for k, r in enumerate(runs):
            turns = [int(x["num_turns"]) for x in r["records"] if x["env_id"] == e and x.get("success")]
            if not turns:
                continue
            longest = max(longest, max(turns))
            counts = {t: turns.count(t) for t in sorted(set(turns))}
            tallest = max(tallest, *counts.values())
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
            # The legend sits in headroom above the tallest bar, never over a bar: a
            # fourteenth of the axes per entry, and a margin.
            rows = len(ax.get_legend_handles_labels()[0])
            ax.set_ylim(0, tallest / max(0.3, 1 - 0.07 * rows - 0.08))
            ax.legend(fontsize=7, loc="upper right", frameon=False)
        else:
            ax.text(0.5, 0.5, "no solved episodes", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
