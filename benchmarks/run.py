"""Benchmark gem_core side by side with the reference GEM (PyPI gem-llm); prints tables, writes JSON."""

# Each benchmark is a module ``benchmarks/bench_<name>.py``, found at run time. The
# harness runs it once per implementation, each time in a fresh worker process of that
# implementation's own virtual environment (ours: this interpreter's Python; the reference: a
# venv the harness creates and caches under $GEM_CACHE), with a timeout around it.
#
# A benchmark module defines:
#
#     NAME, TITLE, ORDER                          name for --only, table title, position
#     config(args) -> dict                        settings (JSON-able) from the parsed options
#     measure(backend, config) -> dict            runs in the worker; `backend` is backends.Backend
#     render(ours, reference, ref_note) -> str    the table (either result may be None)
#   optional:
#     add_arguments(parser)                       its own command-line options
#     reference_config(config, ours) -> dict|None the reference's settings (None: skip it)
#     timeout_s(config) -> float                  worker timeout (default 600 s)
#     targets(ours, reference) -> list[dict]      {"target", "value", "met"} rows for the summary
#     interleaved_config(config, ours, reference) -> dict|None
#     measure_interleaved(backend, config, baton) -> dict
#                                                 a second phase, after both runs: the two
#                                                 workers run at once and take turns in short
#                                                 blocks (`baton.Baton`), so host load that drifts
#                                                 between the two runs cannot skew a ratio; each
#                                                 side's result lands under "interleaved" in its
#                                                 result (None: no such phase)
#
# A ``bench_<name>.py`` without that interface but with a ``main()`` taking ``--quick``
# and ``--json PATH`` is run as a standalone script (gem_core only; its printed report
# and JSON are included as they are).

from __future__ import annotations

import argparse
import ast
import datetime as dt
import importlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from baton import BATON_ENV  # noqa: E402
from common import render_table  # noqa: E402
from reference_venv import REFERENCE_REQUIREMENT, default_venv_dir, ensure_reference_python  # noqa: E402

DEFAULT_TIMEOUT_S = 600.0
STANDALONE_TIMEOUT_S = 1800.0


@dataclass
class ScriptBenchmark:
    """A standalone ``bench_<name>.py`` script (``main()`` with ``--quick`` and ``--json PATH``).

    Run as-is under our Python (gem_core only, no reference side); its printed report
    becomes the section body and its JSON file the result.
    """

    NAME: str
    TITLE: str
    path: Path
    ORDER: int = 90


def _top_level_names(path: Path) -> tuple[set[str], str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    doc = (ast.get_docstring(tree) or path.stem).strip().splitlines()[0]
    return names, doc


def discover() -> list[ModuleType | ScriptBenchmark]:
    """Every ``bench_*.py`` next to this file, in ``ORDER``.

    Modules with the harness interface (``NAME`` and ``measure``) are imported; other
    scripts with a ``main`` are run as standalone scripts. Nothing heavy is imported here.
    """
    found: list[ModuleType | ScriptBenchmark] = []
    for path in sorted(HERE.glob("bench_*.py")):
        names, doc = _top_level_names(path)
        if {"NAME", "measure"} <= names:
            found.append(importlib.import_module(path.stem))
        elif "main" in names:
            found.append(ScriptBenchmark(path.stem[len("bench_"):], doc, path))
    return sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.NAME))


def build_parser(modules: list[ModuleType | ScriptBenchmark]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="Benchmark gem_core side by side with the reference GEM (gem-llm) and print "
                    "tables; results are also written as JSON.",
        epilog="Benchmarks: " + "; ".join(f"{m.NAME}: {m.TITLE.rstrip('.')}" for m in modules)
               + ". Run by `make bench`. Add one by dropping a bench_<name>.py module into "
                 "benchmarks/ (see benchmarks/README.md).",
    )
    parser.add_argument("--quick", action="store_true",
                        help="small counts and short trials (a smoke test, not a measurement)")
    parser.add_argument("--only", action="append", choices=[m.NAME for m in modules], metavar="NAME",
                        help=f"run only this benchmark (repeatable): {', '.join(m.NAME for m in modules)}")
    parser.add_argument("--no-reference", action="store_true",
                        help="measure gem_core only (skip installing and running the reference)")
    parser.add_argument("--json", metavar="PATH", type=Path,
                        help="write the JSON results here (default: benchmarks/results/<timestamp>.json)")
    parser.add_argument("--reference-venv", metavar="DIR", type=Path, default=default_venv_dir(),
                        help=f"venv holding the reference {REFERENCE_REQUIREMENT}; created when "
                             "missing (default: %(default)s)")
    parser.add_argument("--timeout", metavar="S", type=float,
                        help="timeout per worker run in seconds (default: sized per benchmark)")
    for module in modules:
        if isinstance(module, ModuleType) and hasattr(module, "add_arguments"):
            module.add_arguments(parser)
    return parser


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def run_process(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group; on timeout kill the group (its workers too)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=REPO, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _worker_env(backend: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", BATON_ENV)}
    if backend == "ours":
        env["PYTHONPATH"] = str(REPO)  # measure this clone's gem_core
    return env


def run_worker(python: Path | str, backend: str, module: ModuleType, config: dict[str, Any],
               timeout: float) -> dict[str, Any]:
    """Run ``worker.py`` for one (backend, benchmark); return its JSON (with "error" on failure)."""
    env = _worker_env(backend)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [str(python), str(HERE / "worker.py"), "--backend", backend, "--bench", module.NAME,
               "--config", json.dumps(config), "--out", str(out)]
        start = time.perf_counter()
        try:
            proc = run_process(cmd, env, timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        wall = time.perf_counter() - start
        if out.exists():
            data = json.loads(out.read_text())
            data["worker_wall_s"] = wall
            return data
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        return {"error": f"worker exited with {proc.returncode} and no result: {tail}"}


def run_interleaved(module: ModuleType, sides: list[tuple[Path | str, str]], config: dict[str, Any],
                    timeout: float) -> list[dict[str, Any]]:
    """Run ``worker.py --interleaved`` for two (python, backend) sides at once, taking turns.

    The two workers are joined by two pipes in a ring (`baton.Baton`); the first side gets
    the first turn. Returns each side's JSON (with "error" on failure), in ``sides``' order.
    """
    if len(sides) != 2:
        raise ValueError(f"run_interleaved takes two sides, got {len(sides)}")
    to_first, to_second = os.pipe(), os.pipe()  # (read, write) each
    fds = [(to_first[0], to_second[1]), (to_second[0], to_first[1])]
    os.write(to_first[1], b"t")  # the first side's turn
    procs, outs, logs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for i, ((python, backend), (read_fd, write_fd)) in enumerate(zip(sides, fds, strict=True)):
                env = _worker_env(backend)
                env[BATON_ENV] = f"{read_fd},{write_fd}"
                out, log_path = Path(tmp) / f"result{i}.json", Path(tmp) / f"log{i}.txt"
                cmd = [str(python), str(HERE / "worker.py"), "--backend", backend, "--bench", module.NAME,
                       "--config", json.dumps(config), "--out", str(out), "--interleaved"]
                with open(log_path, "w") as log_file:
                    procs.append(subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                                  cwd=REPO, start_new_session=True, pass_fds=(read_fd, write_fd)))
                outs.append(out)
                logs.append(log_path)
        finally:
            for fd in (*to_first, *to_second):  # the workers hold their own copies
                os.close(fd)
        deadline = time.monotonic() + timeout
        results: list[dict[str, Any]] = []
        for proc, out, log_path in zip(procs, outs, logs, strict=True):
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                for p in procs:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
            if out.exists():
                results.append(json.loads(out.read_text()))
            elif proc.returncode == -signal.SIGKILL:
                results.append({"error": f"interleaved run timed out after {timeout:.0f} s"})
            else:
                tail = "\n".join(log_path.read_text().strip().splitlines()[-8:])
                results.append({"error": f"interleaved worker exited with {proc.returncode} and no result: {tail}"})
    return results


def run_module(module: ModuleType, args: argparse.Namespace, ref_python: Path | None,
               ref_note: str) -> tuple[dict[str, Any], str]:
    """One harness benchmark: ours, then the reference; returns (JSON entry, table text)."""
    config = module.config(args)
    timeout_of = getattr(module, "timeout_s", lambda c: DEFAULT_TIMEOUT_S)
    log(f"{module.NAME}: gem_core ...")
    ours = run_worker(sys.executable, "ours", module, config, args.timeout or timeout_of(config))
    entry: dict[str, Any] = {"config": config, "ours": ours.get("result"), "reference": None,
                             "errors": {}, "versions": {}, "wall_s": {}}
    _record(entry, "ours", ours)
    note = ref_note
    if ref_python is not None:
        ref_config = (module.reference_config(config, ours.get("result"))
                      if hasattr(module, "reference_config") else config)
        if ref_config is None:
            note = "skipped: nothing to compare with"
        else:
            log(f"{module.NAME}: reference ...")
            ref = run_worker(ref_python, "reference", module, ref_config,
                             args.timeout or timeout_of(ref_config))
            entry["reference"] = ref.get("result")
            entry["reference_config"] = ref_config
            _record(entry, "reference", ref)
            if "error" in ref:
                note = f"n/a: {ref['error']}"
        if hasattr(module, "interleaved_config") and entry["ours"] and entry["reference"]:
            inter_config = module.interleaved_config(config, entry["ours"], entry["reference"])
            if inter_config is not None:
                log(f"{module.NAME}: gem_core and the reference, interleaved ...")
                both = run_interleaved(module, [(sys.executable, "ours"), (ref_python, "reference")], inter_config,
                                       args.timeout or timeout_of(inter_config))
                entry["interleaved_config"] = inter_config
                for side, data in zip(("ours", "reference"), both, strict=True):
                    entry[side]["interleaved"] = data.get("result") or {"error": data.get("error", "no result")}
                    entry[side]["interleaved"]["baton"] = data.get("baton")
    if hasattr(module, "targets"):
        entry["targets"] = module.targets(entry["ours"], entry["reference"])
    text = module.render(entry["ours"], entry["reference"], note)
    if "ours" in entry["errors"]:
        text += f"\nours: n/a: {entry['errors']['ours']}"
    return entry, text


def run_script(script: ScriptBenchmark, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """One standalone script, gem_core only; returns (JSON entry, its printed report)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(REPO)
    entry: dict[str, Any] = {"standalone": str(script.path.relative_to(REPO)), "ours": None,
                             "reference": None, "errors": {}, "wall_s": {}}
    timeout = args.timeout or STANDALONE_TIMEOUT_S
    log(f"{script.NAME}: gem_core (standalone script) ...")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(script.path), *(["--quick"] if args.quick else []),
               "--json", str(out)]
        start = time.perf_counter()
        try:
            proc = run_process(cmd, env, timeout)
        except subprocess.TimeoutExpired:
            entry["errors"]["ours"] = f"timed out after {timeout:.0f} s"
            return entry, f"n/a: {entry['errors']['ours']}"
        entry["wall_s"]["ours"] = time.perf_counter() - start
        if proc.returncode == 0 and out.exists():
            entry["ours"] = json.loads(out.read_text())
            return entry, proc.stdout.rstrip() + "\nreference: n/a (standalone script, gem_core only)"
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        entry["errors"]["ours"] = f"exit {proc.returncode}: {tail}"
        return entry, f"n/a: {entry['errors']['ours']}"


def main(argv: list[str] | None = None) -> int:
    modules = discover()
    args = build_parser(modules).parse_args(argv)
    selected = [m for m in modules if not args.only or m.NAME in args.only]

    started = dt.datetime.now()
    meta: dict[str, Any] = {
        "started": started.isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv,
        "quick": args.quick,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "loadavg_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "reference": {"requirement": REFERENCE_REQUIREMENT},
    }

    ref_python: Path | None = None
    if not any(isinstance(b, ModuleType) for b in selected):
        ref_note = "not needed by the selected benchmarks"
    elif args.no_reference:
        ref_note = "skipped (--no-reference)"
    else:
        ref_python, why = ensure_reference_python(args.reference_venv, log=log)
        ref_note = "" if ref_python else f"n/a: {why}"
        if why:
            log(f"reference unavailable, measuring gem_core only: {why}")
        meta["reference"]["python"] = str(ref_python) if ref_python else None
    meta["reference"]["status"] = "ok" if ref_python else ref_note

    results: dict[str, Any] = {}
    summary: list[dict[str, Any]] = []
    for bench in selected:
        if isinstance(bench, ScriptBenchmark):
            entry, text = run_script(bench, args)
        else:
            entry, text = run_module(bench, args, ref_python, ref_note)
        print(f"\n== {bench.NAME}: {bench.TITLE} ==")
        print(text)
        sys.stdout.flush()
        summary.extend(entry.get("targets", []))
        results[bench.NAME] = entry

    if summary:
        print("\n== targets (issue 2 / issue 3) ==")
        print(render_table(["target", "measured", "status"],
                           [[r["target"], r["value"], _status(r["met"])] for r in summary], left=3))

    meta["loadavg_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    meta["wall_s"] = (dt.datetime.now() - started).total_seconds()
    meta["versions"] = {
        side: next((r["versions"][side] for r in results.values() if side in r.get("versions", {})), None)
        for side in ("ours", "reference")
    }
    path = args.json or HERE / "results" / f"{started:%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "benchmarks": results}, indent=1, default=str) + "\n")
    print(f"\nJSON: {path}")
    return 1 if any("ours" in r["errors"] for r in results.values()) else 0


def _record(entry: dict[str, Any], side: str, data: dict[str, Any]) -> None:
    if "error" in data:
        entry["errors"][side] = data["error"]
        if data.get("traceback"):
            entry.setdefault("tracebacks", {})[side] = data["traceback"]
    if data.get("version"):
        entry["versions"][side] = data["version"]
    if "worker_wall_s" in data:
        entry["wall_s"][side] = data["worker_wall_s"]


def _status(met: bool | None) -> str:
    return "n/a" if met is None else "met" if met else "MISSED"


if __name__ == "__main__":
    sys.exit(main())
