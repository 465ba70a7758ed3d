"""Python tool: latency of print(1+1) and calls/s with 1 and 8 callers, gem_core vs the reference."""

# A harness benchmark (run by run.py in each implementation's own venv). Ours runs the
# sandboxed warm pool (`gem_core.tools.PythonCodeTool`); the reference runs
# `gem.tools.python_code_tool.PythonCodeTool` (one unsandboxed subprocess per call).
# `main(argv)` runs just this benchmark through run.py, both sides included.

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import fmt_ratio, fmt_seconds, percentile, render_table

NAME = "python_tool"
TITLE = "Python tool: print(1+1) latency and calls/s (1 and 8 callers)"
ORDER = 40
ACTION = "Let me check.\n<python>\nprint(1+1)\n</python>"
CALLERS = (1, 8)


def add_arguments(parser: Any) -> None:
    parser.add_argument("--py-pool-size", type=int, default=None, metavar="N",
                        help="python_tool: slots of gem_core's sandbox pool (default: its default)")


def config(args: Any) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    return {"latency_calls": 30 if quick else 300, "warmup_calls": 5 if quick else 20,
            "throughput_s": 1.0 if quick else 3.0, "callers": list(CALLERS),
            "pool_size": getattr(args, "py_pool_size", None)}


def timeout_s(config: dict[str, Any]) -> float:
    return 300.0


def _make_tool(backend: Any, config: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """``(call, close, facts)``: ``call()`` runs ACTION once and returns the observation."""
    if backend.name == "ours":
        from gem_core.tools import PythonCodeTool

        options = {"size": config["pool_size"]} if config.get("pool_size") else {}
        tool = PythonCodeTool(sandbox_options=options)
        tool.sandbox.warm_up()

        def call() -> str:
            return tool.run(ACTION).observation

        facts = {"isolation": tool.sandbox.isolation, "pool_size": tool.sandbox.size}
        return call, tool.close, facts
    with contextlib.redirect_stdout(io.StringIO()):
        from gem.tools.python_code_tool import PythonCodeTool as RefTool

    ref = RefTool()

    def ref_call() -> str:
        return ref.execute_action(ACTION)[2]

    return ref_call, lambda: None, {"isolation": "none (plain subprocess)"}


def _throughput(call: Any, callers: int, seconds: float) -> float:
    stop = time.perf_counter() + seconds
    counts = [0] * callers

    def loop(i: int) -> None:
        while time.perf_counter() < stop:
            call()
            counts[i] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def measure(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    call, close, facts = _make_tool(backend, config)
    try:
        observation = call()
        if "2" not in observation:
            raise RuntimeError(f"print(1+1) gave {observation!r}, expected an observation holding 2")
        for _ in range(config["warmup_calls"]):
            call()
        samples = []
        for _ in range(config["latency_calls"]):
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        rates = {str(n): _throughput(call, n, config["throughput_s"]) for n in config["callers"]}
    finally:
        close()
    return {**facts, "observation": observation, "p50_s": percentile(samples, 50),
            "p99_s": percentile(samples, 99), "n": len(samples), "calls_per_s": rates}


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    def lat(r: dict[str, Any] | None, key: str) -> str:
        return fmt_seconds(r[key]) if r else "n/a"

    def rate(r: dict[str, Any] | None, n: int) -> str:
        return f"{r['calls_per_s'][str(n)]:.0f}" if r else "n/a"

    rows = [
        ["p50 latency", lat(ours, "p50_s"), lat(ref, "p50_s"),
         fmt_ratio(ref["p50_s"] / ours["p50_s"] if ours and ref else None)],
        ["p99 latency", lat(ours, "p99_s"), lat(ref, "p99_s"),
         fmt_ratio(ref["p99_s"] / ours["p99_s"] if ours and ref else None)],
    ]
    for n in CALLERS:
        ratio = ours["calls_per_s"][str(n)] / ref["calls_per_s"][str(n)] if ours and ref else None
        rows.append([f"calls/s, {n} caller{'s' if n > 1 else ''}", rate(ours, n), rate(ref, n),
                     fmt_ratio(1 / ratio if ratio else None)])
    text = render_table(["print(1+1)", "ours: gem_core", "reference: gem", "ref/ours"], rows)
    if ours:
        text += f"\nours: isolation={ours['isolation']}, pool size {ours['pool_size']}"
    if ref_note:
        text += f"\nreference: {ref_note}"
    return text


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not ours:
        return [{"target": "python tool p50 <= 5 ms with isolation", "value": "n/a", "met": None}]
    value = f"{fmt_seconds(ours['p50_s'])} ({ours['isolation']})"
    if ref:
        value += f", reference {fmt_seconds(ref['p50_s'])}"
    met = ours["p50_s"] <= 0.005 and ours["isolation"] == "bwrap"
    return [{"target": "python tool p50 <= 5 ms with isolation", "value": value, "met": met}]


def main(argv: list[str] | None = None) -> int:
    """Run only this benchmark through the harness (``--quick``, ``--json PATH``, ...)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run

    return run.main(["--only", NAME, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
