"""Shared benchmark helpers: timing loops, statistics, memory readings and table formatting."""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "Unavailable",
    "measure_rates",
    "summarize",
    "percentile",
    "rss_bytes",
    "fmt_rate",
    "fmt_seconds",
    "fmt_ratio",
    "fmt_mib",
    "render_table",
    "error_text",
]


class Unavailable(Exception):
    """A measurement cannot run on this backend (missing feature, env not registered, ...)."""


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    """Mean, median, p99, min, max and count of a list of latencies (seconds)."""
    return {
        "n": len(samples),
        "mean_s": statistics.fmean(samples),
        "median_s": statistics.median(samples),
        "p99_s": percentile(samples, 99),
        "min_s": min(samples),
        "max_s": max(samples),
    }


def _calibrate(call: Callable[[], object], target_s: float, warmup_calls: int, multiple: int) -> int:
    """Calls per trial so that one trial lasts about ``target_s`` (a multiple of ``multiple``)."""
    for _ in range(warmup_calls):
        call()
    n, start = 0, time.perf_counter()
    while True:  # until a tenth of the target has passed (at least one call)
        call()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= target_s / 10:
            break
    calls = max(1, round(target_s * n / elapsed)) if elapsed > 0 else 1
    return max(multiple, math.ceil(calls / multiple) * multiple)


def measure_rates(
    calls: dict[str, tuple[Callable[[], object], int]],
    *,
    target_s: float,
    trials: int,
    warmup_calls: int = 1,
    calls_multiple: int = 1,
) -> dict[str, dict[str, Any]]:
    """Items per second of each ``name -> (call, items_per_call)``, trials interleaved.

    Each call is warmed up and calibrated so that one trial lasts about ``target_s``
    (rounded up to a multiple of ``calls_multiple``, so every trial covers whole episode
    cycles). Then ``trials`` rounds run one trial of each call in turn, so a change of
    background load hits every contender alike. Reports the median over trials.
    """
    plan = {name: _calibrate(call, target_s, warmup_calls, calls_multiple)
            for name, (call, _) in calls.items()}
    rates: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(trials):
        for name, (call, items) in calls.items():
            count = plan[name]
            start = time.perf_counter()
            for _ in range(count):
                call()
            rates[name].append(items * count / (time.perf_counter() - start))
    return {
        name: {
            "steps_per_s": statistics.median(rates[name]),
            "trials": rates[name],
            "calls_per_trial": plan[name],
            "items_per_call": calls[name][1],
        }
        for name in calls
    }


def rss_bytes() -> int:
    """Resident set size of this process now (Linux ``/proc``; peak RSS elsewhere)."""
    _trim_heap()
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _trim_heap() -> None:
    """Return free heap pages to the OS (glibc), so RSS reflects live memory only."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


def error_text(exc: BaseException) -> str:
    """``Type: message`` on one line (no terminal colours), cut to a readable length."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(exc).__name__}: {exc}")
    text = " ".join(text.replace("*", " ").split())
    return text if len(text) <= 240 else text[:237] + "..."


# ----------------------------------------------------------------------------- formatting


def fmt_rate(value: float | None) -> str:
    """``1.23M``, ``45.6k``, ``789`` (per second), or ``n/a``."""
    if value is None:
        return "n/a"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def fmt_seconds(value: float | None) -> str:
    """Seconds with a unit that keeps three significant digits, or ``n/a``."""
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.3g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


def fmt_ratio(value: float | None) -> str:
    """``1.23x`` or ``n/a``."""
    return "n/a" if value is None else f"{value:.3g}x"


def fmt_mib(value: float | None) -> str:
    """Bytes as MiB, or ``n/a``."""
    return "n/a" if value is None else f"{value / 2**20:.3g} MiB"


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    """A plain-text table: the first ``left`` columns left-aligned, the others right-aligned."""
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(widths[i]) if i < left else cell.rjust(widths[i]) for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out.extend(line(row) for row in rows)
    return "\n".join(out)
