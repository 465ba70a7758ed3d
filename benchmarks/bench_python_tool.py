"""Python tool: latency of print(1+1) back to back and calls/s with 1 and 8 callers, gem_core
(with its Python installation under $HOME and under /tmp) vs the reference."""

# A harness benchmark (run by run.py in each implementation's own venv). Ours runs the
# sandboxed warm pool (`gem_core.tools.PythonCodeTool`) twice: from the venv run.py gave
# it (e.g. ~/.cache/gem/venv-core) and from a throwaway venv under /tmp (made offline:
# ``python -m venv --without-pip`` plus a copy of numpy, which the zygotes preload), the
# layout of many CI runners, where bubblewrap binds the venv inside the private /tmp.
# The reference runs `gem.tools.python_code_tool.PythonCodeTool` (one unsandboxed
# subprocess per call). `main(argv)` runs just this benchmark through run.py.

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common import fmt_ratio, fmt_seconds, percentile, render_table

NAME = "python_tool"
TITLE = "Python tool: print(1+1) latency back to back and calls/s (1 and 8 callers)"
ORDER = 40
ACTION = "Let me check.\n<python>\nprint(1+1)\n</python>"
CALLERS = (1, 8)
LOCATIONS = ("home", "tmp")  # where our Python installation lives


def add_arguments(parser: Any) -> None:
    parser.add_argument("--py-pool-size", type=int, default=None, metavar="N",
                        help="python_tool: slots of gem_core's sandbox pool (default: its default)")


def config(args: Any) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    return {"latency_calls": 30 if quick else 300, "warmup_calls": 5 if quick else 20,
            "throughput_s": 1.0 if quick else 3.0, "callers": list(CALLERS),
            "pool_size": getattr(args, "py_pool_size", None)}


def timeout_s(config: dict[str, Any]) -> float:
    if "blocks" in config:  # the interleaved phase: both sides' turns, one after the other
        return 120.0 + 2 * (config["blocks"] + 1) * (config["block_s"] + 1.0)
    return 300.0


def interleaved_config(config: dict[str, Any], ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any] | None:
    """Both sides' back-to-back latency again, taking turns in blocks of ``block_s``.

    A reference call takes ~130 ms, so a block holds a few of its calls and tens of ours;
    the ratio is the median over paired blocks (block i of each side ran back to back).
    """
    if not (ours.get("p50_s") and ref.get("p50_s")):
        return None
    quick = config["latency_calls"] < 100
    return {"blocks": 4 if quick else 20, "block_s": 0.3 if quick else 0.6,
            "warmup_calls": config["warmup_calls"], "pool_size": config.get("pool_size")}


def measure_interleaved(backend: Any, config: dict[str, Any], baton: Any) -> dict[str, Any]:
    """p50 latency of back-to-back calls per block, one block per turn of ``baton``.

    Each side takes the same number of turns (one to build and warm up, then ``blocks``
    timed ones) whatever fails, so the turns stay paired.
    """
    p50s: list[float] = []
    samples: list[float] = []
    error = None
    call = close = None
    with baton:  # untimed: build and warm up
        try:
            call, close, _ = _make_tool(backend, config)
            for _ in range(config["warmup_calls"]):
                call()
        except Exception as e:  # noqa: BLE001 - reported in the result
            error = f"{type(e).__name__}: {e}"
    try:
        for _ in range(config["blocks"]):
            with baton:
                if error is not None:
                    continue
                block: list[float] = []
                stop = time.perf_counter() + config["block_s"]
                try:
                    while not block or time.perf_counter() < stop:
                        start = time.perf_counter()
                        call()
                        block.append(time.perf_counter() - start)
                except Exception as e:  # noqa: BLE001 - reported in the result
                    error = f"{type(e).__name__}: {e}"
                    continue
                p50s.append(percentile(block, 50))
                samples.extend(block)
    finally:
        if close is not None:
            close()
    result: dict[str, Any] = {"block_p50_s": p50s, "calls": len(samples),
                              "p50_s": percentile(samples, 50) if samples else None}
    if error is not None:
        result["error"] = error
    return result


def interleaved_ratio(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> float | None:
    """Median over the paired blocks of reference p50 / our p50 (how many times faster ours is)."""
    o = ((ours or {}).get("interleaved") or {}).get("block_p50_s")
    r = ((ref or {}).get("interleaved") or {}).get("block_p50_s")
    if not o or not r or len(o) != len(r):
        return None
    ratios = sorted(b / a for a, b in zip(o, r, strict=True) if a > 0)
    if not ratios:
        return None
    n = len(ratios)
    return ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2


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
        call.phase_times = tool.sandbox.phase_times  # type: ignore[attr-defined]
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


def _measure_here(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    call, close, facts = _make_tool(backend, config)
    load_before = os.getloadavg()[0]
    try:
        observation = call()
        if "2" not in observation:
            raise RuntimeError(f"print(1+1) gave {observation!r}, expected an observation holding 2")
        for _ in range(config["warmup_calls"]):
            call()
        phase_times = getattr(call, "phase_times", None)
        seen = {k: len(v) for k, v in phase_times().items()} if phase_times else {}
        samples = []
        for _ in range(config["latency_calls"]):
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        phases = {}
        if phase_times:  # the runs of the latency loop only
            for name, values in phase_times().items():
                values = values[seen.get(name, 0):]
                if values:
                    phases[name] = {"p50_s": percentile(values, 50), "mean_s": sum(values) / len(values)}
        rates = {str(n): _throughput(call, n, config["throughput_s"]) for n in config["callers"]}
    finally:
        close()
    return {**facts, "observation": observation, "p50_s": percentile(samples, 50),
            "p99_s": percentile(samples, 99), "n": len(samples), "calls_per_s": rates,
            "mean_s": sum(samples) / len(samples), "phases": phases,
            "prefix": sys.prefix, "load_avg_1m": [load_before, os.getloadavg()[0]],
            "cpus": os.cpu_count()}


def _tmp_venv(parent: str) -> Path:
    """A venv under ``parent`` whose site-packages holds numpy (copied from ours) and a
    ``.pth`` to this clone, built without network."""
    import numpy

    venv = Path(parent) / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    source = Path(numpy.__file__).resolve().parent
    for directory in (source, source.with_name("numpy.libs")):
        if directory.is_dir():
            shutil.copytree(directory, Path(site) / directory.name, symlinks=True)
    Path(site, "gem-bench.pth").write_text(str(Path(__file__).resolve().parent) + "\n"
                                           + str(Path(__file__).resolve().parents[1]) + "\n")
    return python


def measure(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    if backend.name != "ours":
        return _measure_here(backend, config)
    results = {"home": _measure_here(backend, config)}
    parent = tempfile.mkdtemp(prefix="gem-bench-python-tool-", dir="/tmp")
    try:
        python = _tmp_venv(parent)
        out = Path(parent) / "result.json"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        proc = subprocess.run([str(python), str(Path(__file__).resolve()), "--child", json.dumps(config), str(out)],
                              capture_output=True, text=True, timeout=timeout_s(config), env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"the /tmp venv measurement failed: {proc.stderr[-2000:]}")
        results["tmp"] = json.loads(out.read_text())
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return {**results["home"], "locations": results}


def _where(ours: dict[str, Any] | None, location: str) -> dict[str, Any] | None:
    if not ours:
        return None
    return ours.get("locations", {}).get(location, ours if location == "home" else None)


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    def lat(r: dict[str, Any] | None, key: str) -> str:
        return fmt_seconds(r[key]) if r else "n/a"

    def rate(r: dict[str, Any] | None, n: int) -> str:
        return f"{r['calls_per_s'][str(n)]:.0f}" if r else "n/a"

    home, tmp = _where(ours, "home"), _where(ours, "tmp")
    rows = [
        ["p50 latency", lat(home, "p50_s"), lat(tmp, "p50_s"), lat(ref, "p50_s"),
         fmt_ratio(ref["p50_s"] / home["p50_s"] if home and ref else None)],
        ["p99 latency", lat(home, "p99_s"), lat(tmp, "p99_s"), lat(ref, "p99_s"),
         fmt_ratio(ref["p99_s"] / home["p99_s"] if home and ref else None)],
    ]
    inter = [((side or {}).get("interleaved") or {}) for side in (ours, ref)]
    if any(inter):
        rows.append(["p50 latency, interleaved", lat(inter[0], "p50_s") if inter[0].get("p50_s") else "n/a", "",
                     lat(inter[1], "p50_s") if inter[1].get("p50_s") else "n/a",
                     fmt_ratio(interleaved_ratio(ours, ref))])
    for n in CALLERS:
        ratio = home["calls_per_s"][str(n)] / ref["calls_per_s"][str(n)] if home and ref else None
        rows.append([f"calls/s, {n} caller{'s' if n > 1 else ''}", rate(home, n), rate(tmp, n), rate(ref, n),
                     fmt_ratio(1 / ratio if ratio else None)])
    text = render_table(["print(1+1), back to back", "ours: venv in $HOME", "ours: venv in /tmp",
                         "reference: gem", "ref/ours"], rows)
    if ours:
        text += f"\nours: isolation={ours['isolation']}, pool size {ours['pool_size']}"
        if tmp:
            text += f"; /tmp venv: {tmp['prefix']}"
        loads = [f"{a:.1f}->{b:.1f}" for r in (home, tmp) if r and "load_avg_1m" in r
                 for a, b in [r["load_avg_1m"]]]
        if loads:
            text += f"\n1-minute load average during the runs ($HOME, /tmp): {', '.join(loads)} on {ours.get('cpus')} CPUs"
    if home and home.get("phases"):
        text += "\n\n" + _render_phases(home)
    if any(inter):
        blocks = len(inter[0].get("block_p50_s") or [])
        text += (f"\ninterleaved: the two sides took turns in {blocks} blocks of back-to-back calls (median over "
                 "paired blocks of the blocks' p50 ratio)")
        for label, side in (("ours", inter[0]), ("reference", inter[1])):
            if side.get("error"):
                text += f"\ninterleaved, {label}: n/a: {side['error']}"
    if ref_note:
        text += f"\nreference: {ref_note}"
    return text


# Where a back-to-back call's time goes (`Sandbox.phase_times`), in the order a call meets
# them; the cleanup runs after the reply, on the slot's own time (a call waits for it only
# when it comes back to that slot before it is done: ``slot_wait``).
_PATH = ("slot_wait", "transport", "spare_wait", "child", "finish")
_CLEANUP = ("cleanup_reap", "cleanup_files", "cleanup_ipc", "cleanup_fork")
_PHASE_TEXT = {
    "slot_wait": "a free slot, and its zygote's cleanup of its last run",
    "transport": "request and reply, host <-> zygote (JSON over pipes)",
    "spare_wait": "the pre-forked child finishing its setup",
    "child": "the child: read the request, run the code, report the exit",
    "finish": "kill what the run left, collect its output",
    "cleanup_reap": "after the reply: reap the run's processes",
    "cleanup_files": "after the reply: its work dir and the private /tmp",
    "cleanup_ipc": "after the reply: SysV IPC objects it left",
    "cleanup_fork": "after the reply: fork and seed the next run's child",
}


def _render_phases(r: dict[str, Any]) -> str:
    phases = r["phases"]
    rows = []
    for name in (*_PATH, *_CLEANUP):
        if name in phases:
            rows.append([name, fmt_seconds(phases[name]["p50_s"]), fmt_seconds(phases[name]["mean_s"]),
                         _PHASE_TEXT.get(name, "")])
    on_path = sum(phases[name]["mean_s"] for name in _PATH if name in phases)
    tool = r["mean_s"] - on_path
    rows.append(["tool", "", fmt_seconds(tool), "PythonCodeTool: parse the action, format the observation "
                 "(mean call minus the phases above)"])
    text = "where a call's time goes (ours, venv in $HOME; means add up to the mean call, "
    text += f"{fmt_seconds(r['mean_s'])}):\n"
    biggest = max((name for name in _PATH if name in phases), key=lambda n: phases[n]["mean_s"], default=None)
    text += render_table(["phase", "p50", "mean", "what"], rows)
    if biggest:
        text += f"\nlargest on the call's path: {biggest}"
    return text


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    rows = []
    for location in LOCATIONS:
        r = _where(ours, location)
        name = (f"python tool p50 <= 3 ms back to back, every protection on (bwrap; venv in "
                f"{'$HOME' if location == 'home' else '/tmp'})")
        if not r:
            rows.append({"target": name, "value": "n/a", "met": None})
            continue
        value = f"{fmt_seconds(r['p50_s'])} ({r['isolation']})"
        if ref and location == "home":
            value += f", reference {fmt_seconds(ref['p50_s'])}"
            ratio = interleaved_ratio(ours, ref)
            if ratio is not None:
                value += f"; interleaved: {ratio:.0f}x faster than the reference"
        rows.append({"target": name, "value": value, "met": r["p50_s"] <= 0.003 and r["isolation"] == "bwrap"})
    home = _where(ours, "home")
    rate = home["calls_per_s"].get("8") if home else None
    rows.append({"target": "python tool >= 150 calls/s with 8 callers (venv in $HOME)",
                 "value": "n/a" if rate is None else f"{rate:.0f}/s",
                 "met": None if rate is None else rate >= 150})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run only this benchmark through the harness (``--quick``, ``--json PATH``, ...)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run

    return run.main(["--only", NAME, *(sys.argv[1:] if argv is None else argv)])


def _child(config_json: str, out: str) -> int:
    """The /tmp venv's half of `measure` (run under that venv's Python)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from backends import get_backend

    result = _measure_here(get_backend("ours"), json.loads(config_json))
    Path(out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2], sys.argv[3]))
    sys.exit(main())
