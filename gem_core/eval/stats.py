"""Evaluation statistics: Wilson intervals and the per-env summary computed from episode records."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = [
    "wilson_interval",
    "summarize",
    "summary_markdown",
    "summary_table",
    "end_category",
    "SUMMARY_COLUMNS",
    "END_CATEGORIES",
]

#: z for a two-sided 95% interval.
Z95 = 1.959963984540054

#: The summary columns (key, header) shown in printed and Markdown tables.
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("env_id", "env"),
    ("measured", "measured"),
    ("errors", "errored"),
    ("success_rate", "success"),
    ("ci95", "95% CI"),
    ("mean_return", "mean return"),
    ("mean_turns", "mean turns"),
    ("format_error_rate", "format err"),
    ("tool_calls", "tool calls"),
)

#: How an episode ended, for the breakdown (key, header): see `end_category`.
END_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("solved", "solved"),
    ("wrong", "wrong"),
    ("format_error", "format error"),
    ("context", "context exceeded"),
    ("turn_limit", "turn limit"),
    ("error", "error"),
)


def end_category(record: Mapping[str, Any]) -> str:
    """How an episode record ended: one key of `END_CATEGORIES`.

    ``error``: the episode errored (it measured nothing); ``solved``: ``success``;
    ``context``: the context (or response) budget ran out; ``turn_limit``: the turn
    limit (the engine's ``max_turns`` or the env's truncation); ``format_error``: the
    env ended it on a reply it could not read; ``wrong``: any other ending (graded
    wrong, gave up).
    """
    if record.get("error"):
        return "error"
    if record.get("success"):
        return "solved"
    reason = record.get("end_reason")
    if reason in ("context", "response_truncated"):
        return "context"
    if reason in ("max_turns", "env_truncated"):
        return "turn_limit"
    final = record.get("final_format_error")
    if final is None:  # records from before the field: any flagged turn
        final = (record.get("format_errors") or 0) > 0
    return "format_error" if final else "wrong"


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion.

    Args:
        successes: the number of successes (``0 <= successes <= n``).
        n: the number of trials; ``n == 0`` gives ``(0.0, 1.0)`` (nothing is known).
        z: the normal quantile (default: 95% two-sided).

    Returns:
        ``(low, high)``, both in ``[0, 1]``; ``low`` is exactly 0 when ``successes == 0``
        and ``high`` exactly 1 when ``successes == n``.

    Raises:
        InvalidArgument: (a ``ValueError``) ``successes`` outside ``[0, n]`` or a negative ``n``.
    """
    if n < 0 or not 0 <= successes <= n:
        raise InvalidArgument(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # The bounds are exactly 0 with no successes and exactly 1 with all (the formula's
    # rounding gives 5.6e-17 or 0.9999999999999999 there).
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The per-env summary of episode records (see `gem_core.eval.episode_record`).

    An episode that ended with an error (endpoint down, env failure) measured nothing
    about the model: it is counted under ``errors`` and left out of every rate and mean,
    so a broken run shows as errors, never as a low score — and a run with errors says
    so in its status and exit code (`gem_core.eval.evaluate`).

    Returns:
        ``{env_id: row}`` in first-seen order; each row has ``env_id``, ``episodes``
        (records), ``measured`` (records without an error), ``errors``, ``successes``,
        ``success_rate`` (over measured; ``None`` when none is), ``ci95_low``/``ci95_high``
        (Wilson, over measured; ``(0, 1)`` when none is), ``mean_return``, ``mean_turns``,
        ``mean_turns_to_solve`` (over solved episodes, ``None`` when none), ``format_error_rate``
        (share of measured episodes with at least one turn flagged ``format_error``;
        ``None`` when none is measured), ``end_reasons`` (``{category: episodes}`` over
        every record, categories of `END_CATEGORIES`), ``tool_calls`` (tool calls run,
        measured episodes), ``tool_calls_by_name``, ``tool_episodes`` (measured episodes
        that ran a tool), ``mean_generated_tokens`` (over the measured episodes that have
        a count: chat-mode records without server ``usage`` have ``null``; ``None`` when
        none has), ``mean_latency_s``.
    """
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault(str(r["env_id"]), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for env_id, every in groups.items():
        rows = [r for r in every if not r.get("error")]
        n = len(rows)
        wins = sum(1 for r in rows if r.get("success"))
        low, high = wilson_interval(wins, n)
        by_name: dict[str, int] = {}
        for r in rows:
            for name, count in (r.get("tool_calls") or {}).items():
                by_name[name] = by_name.get(name, 0) + int(count)
        solved_turns = [float(r["num_turns"]) for r in rows if r.get("success")]
        ends = {key: 0 for key, _ in END_CATEGORIES}
        for r in every:
            ends[end_category(r)] += 1
        out[env_id] = {
            "env_id": env_id,
            "episodes": len(every),
            "measured": n,
            "errors": len(every) - n,
            "successes": wins,
            "success_rate": wins / n if n else None,
            "ci95_low": low,
            "ci95_high": high,
            "mean_return": _mean([float(r.get("return", 0.0)) for r in rows]),
            "mean_turns": _mean([float(r.get("num_turns", 0)) for r in rows]),
            "mean_turns_to_solve": _mean(solved_turns),
            "format_error_rate": sum(1 for r in rows if r.get("format_errors", 0) > 0) / n if n else None,
            "end_reasons": ends,
            "tool_calls": sum(by_name.values()),
            "tool_calls_by_name": dict(sorted(by_name.items())),
            "tool_episodes": sum(1 for r in rows if r.get("tool_calls")),
            "mean_generated_tokens": _mean(
                [float(r["generated_tokens"]) for r in rows if r.get("generated_tokens") is not None]
            ),
            "mean_latency_s": _mean([float(r.get("latency_s", 0.0)) for r in rows]),
        }
    return out


def _cells(row: Mapping[str, Any]) -> list[str]:
    def num(x: Any, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    tools = ", ".join(f"{k}={v}" for k, v in row["tool_calls_by_name"].items()) or "0"
    measured = row.get("measured", row["episodes"])
    rate = row["success_rate"]
    return [
        str(row["env_id"]),
        str(measured),
        str(row["errors"]),
        "-" if rate is None else f"{rate:.3f} ({row['successes']}/{measured})",
        "-" if not measured else f"[{row['ci95_low']:.3f}, {row['ci95_high']:.3f}]",
        num(row["mean_return"], "+.3f"),
        num(row["mean_turns"], ".2f"),
        num(row["format_error_rate"], ".3f"),
        tools,
    ]


def _end_cells(row: Mapping[str, Any]) -> list[str]:
    ends = row.get("end_reasons") or {}
    return [str(row["env_id"]), *(str(ends.get(key, 0)) for key, _ in END_CATEGORIES)]


def _plain(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return [line.rstrip() for line in lines]


def _markdown(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]


def summary_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """A plain-text table of a `summarize` result (for the terminal): the measures, then
    how the episodes ended (errored ones included)."""
    rows = list(summary.values())
    lines = _plain([h for _, h in SUMMARY_COLUMNS], [_cells(r) for r in rows])
    lines += ["", "episodes by end:"]
    lines += _plain(["env", *(h for _, h in END_CATEGORIES)], [_end_cells(r) for r in rows])
    return "\n".join(lines)


def summary_markdown(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table of a `summarize` result, then the end-reason breakdown."""
    rows = list(summary.values())
    lines = _markdown([h for _, h in SUMMARY_COLUMNS], [_cells(r) for r in rows])
    lines += ["", "Episodes by end:", ""]
    lines += _markdown(["env", *(h for _, h in END_CATEGORIES)], [_end_cells(r) for r in rows])
    return "\n".join(lines)
