"""Math grading benchmark: per-answer latency p50/p99, graded answers/s with 8 threads, PSS of 32 math envs.

Runs through the harness (``benchmarks/run.py --only math_grading``): the same `measure` runs
in a worker of each implementation's own Python.

Both sides build bare math envs over the same problems (our shipped sample of
``axon-rl/MATH-12k``, 50 problems with LaTeX answers; no hub access): ours with
``gem_core.make("math:Math12K", data_path=...)``, the reference with
``gem.envs.math_env.MathEnv(dataset=...)`` (its own ctor; ``make`` would download). Answers
cycle through four forms per problem: the reference answer boxed verbatim and
``x = <answer>`` (correct; our fast path takes both), ``\\displaystyle <answer>``
(correct, needs math-verify) and ``<answer> + 1`` (wrong, needs math-verify). Measured:

1. **Latency**: wall time of ``step`` (which grades) with 1 env on 1 thread, and with 8
   envs stepped by 8 threads at once; p50/p99 per answer and graded answers/s.
2. **Memory**: PSS (``/proc/<pid>/smaps_rollup``) of the process plus all its descendants
   (the grader workers) holding 32 math envs, after every env graded an answer that needs
   math-verify. Ours: 2 shared grader workers; the reference: one ``multiprocessing.Pool(1)``
   per env.

The reference runs its real math env: gem-llm 0.1.0 imports ``datasets`` and ``pylatexenc``
without declaring them, so `reference_venv` installs both (``UNDECLARED_DEPENDENCIES``).
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from common import fmt_mib, fmt_rate, fmt_ratio, fmt_seconds, percentile, render_table

NAME = "math_grading"
TITLE = "math answer grading: latency p50/p99, answers/s with 8 threads, PSS of 32 math envs"
ORDER = 60

SAMPLE = Path(__file__).resolve().parent.parent / "gem_core/data/samples/axon-rl__MATH-12k/train.jsonl"
PSS_TARGET = 1 / 3


def add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("math_grading")
    group.add_argument("--math-envs", type=int, default=32, metavar="N",
                       help="math envs held for the memory reading (default: 32)")
    group.add_argument("--math-threads", type=int, default=8, metavar="N",
                       help="threads (one env each) for the concurrent latency (default: 8)")


def config(args: Any) -> dict[str, Any]:
    return {
        "data": str(SAMPLE),
        "num_envs": getattr(args, "math_envs", 32),
        "threads": getattr(args, "math_threads", 8),
        "seconds": 2.0 if args.quick else 8.0,
    }


def reference_config(cfg: dict[str, Any], ours: dict[str, Any] | None) -> dict[str, Any] | None:
    return cfg


def timeout_s(cfg: dict[str, Any]) -> float:
    return 300.0 + 4 * cfg["seconds"] + 5.0 * cfg["num_envs"]


# --- building envs ---------------------------------------------------------------------------
def _build(backend_name: str, rows: list[dict[str, Any]], n: int, data: str) -> list[Any]:
    if backend_name == "ours":
        import gem_core

        return [gem_core.make("math:Math12K", data_path=data) for _ in range(n)]
    try:
        from datasets import Dataset
        from gem.envs.math_env import MathEnv
    except ImportError as e:
        raise RuntimeError(
            f"the reference's math env needs {e.name!r}, which gem-llm 0.1.0 does not declare; "
            "rebuild its venv with: python benchmarks/reference_venv.py"
        ) from e

    dataset = Dataset.from_list(rows)
    return [MathEnv(dataset=dataset, seed=i) for i in range(n)]


def _answer(env: Any) -> str:
    return str(getattr(env, "unwrapped", env).answer)


def _action(env: Any, k: int) -> tuple[str, bool]:
    a = _answer(env)
    form = k % 4
    if form == 0:
        return f"Let me compute. So the answer is \\boxed{{{a}}}.", True
    if form == 1:
        return f"Let me compute. So the answer is \\boxed{{x = {a}}}.", True
    if form == 2:
        return f"Let me compute. So the answer is \\boxed{{\\displaystyle {a}}}.", True
    return f"Let me compute. So the answer is \\boxed{{{a} + 1}}.", False


# --- measuring -------------------------------------------------------------------------------
def _run_threads(envs: list[Any], seconds: float) -> dict[str, Any]:
    stop = threading.Event()
    lat: list[list[float]] = [[] for _ in envs]
    slow_forms: list[list[float]] = [[] for _ in envs]  # forms 2 and 3: math-verify needed
    agree = [0] * len(envs)
    flagged = [0] * len(envs)
    errors: list[str] = []

    def loop(i: int) -> None:
        env, j = envs[i], 0
        try:
            while not stop.is_set():
                # Problem k, answer form i + j: every thread cycles through all forms.
                env.reset(seed=i + j * len(envs))
                action, expected = _action(env, i + j)
                j += 1
                start = time.perf_counter()
                _, reward, *_, info = env.step(action)
                lat[i].append(time.perf_counter() - start)
                if (i + j - 1) % 4 >= 2:
                    slow_forms[i].append(lat[i][-1])
                agree[i] += (float(reward) == 1.0) == expected
                flagged[i] += bool(info.get("grader_timeout") or info.get("grader_error"))
        except Exception as e:  # noqa: BLE001 - report, do not hang the benchmark
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(len(envs))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    elapsed = time.perf_counter() - start
    samples = [x for xs in lat for x in xs]
    verify_samples = [x for xs in slow_forms for x in xs] or [float("nan")]
    if not samples:
        return {"error": errors[0] if errors else "no answer graded"}
    return {
        "threads": len(envs),
        "answers": len(samples),
        "seconds": elapsed,
        "answers_per_s": len(samples) / elapsed,
        "p50_s": percentile(samples, 50),
        "p99_s": percentile(samples, 99),
        "mean_s": statistics.fmean(samples),
        "verify_p50_s": percentile(verify_samples, 50),
        "verify_p99_s": percentile(verify_samples, 99),
        "agreement": sum(agree) / len(samples),
        "flagged": sum(flagged),
        **({"error": errors[0]} if errors else {}),
    }


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _pss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def tree_pss(root: int) -> dict[str, Any]:
    """PSS of ``root`` and every descendant, in bytes (Linux only)."""
    kids = _children()
    todo, tree = [root], []
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(kids.get(pid, []))
    pss = {pid: _pss_kib(pid) for pid in tree}
    own = pss.get(root) or 0
    total = sum(v for v in pss.values() if v)
    return {"pss_bytes": total * 1024, "process_pss_bytes": own * 1024,
            "children_pss_bytes": (total - own) * 1024, "processes": len(tree)}


def measure(backend: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    with open(cfg["data"], encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    start = time.perf_counter()
    envs = _build(backend.name, rows, cfg["num_envs"], cfg["data"])
    build_s = time.perf_counter() - start
    try:
        # Every env grades one answer that needs math-verify (each reference env's worker works).
        start = time.perf_counter()
        for i, env in enumerate(envs):
            env.reset(seed=i)
            env.step(_action(env, 2)[0])
        warm_s = time.perf_counter() - start
        single = _run_threads(envs[:1], cfg["seconds"])
        concurrent = _run_threads(envs[: cfg["threads"]], cfg["seconds"])
        memory = tree_pss(os.getpid()) if os.path.exists("/proc/self/smaps_rollup") else None
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:  # noqa: BLE001
                pass
    return {"num_envs": len(envs), "build_s": build_s, "warm_s": warm_s, "single": single,
            "concurrent": concurrent, "memory": memory}


# --- reporting -------------------------------------------------------------------------------
def _get(d: dict[str, Any] | None, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _pss_ratio(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> float | None:
    o, r = _get(ours, "memory", "pss_bytes"), _get(ref, "memory", "pss_bytes")
    return o / r if o and r else None


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    rows = []
    for label, key in (("1 env, 1 thread", "single"), ("8 envs, 8 threads", "concurrent")):
        for name, res in (("ours", ours), ("ref", ref)):
            e = _get(res, key)
            if e is None:
                continue
            if "error" in e and "answers" not in e:
                rows.append([f"{name}: {label}", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a",
                             e["error"][:60]])
                continue
            rows.append([f"{name}: {label}", fmt_seconds(e["p50_s"]), fmt_seconds(e["p99_s"]),
                         fmt_seconds(e.get("verify_p50_s")), fmt_seconds(e.get("verify_p99_s")),
                         fmt_rate(e["answers_per_s"]), f"{e['agreement']:.0%}", str(e["flagged"])])
    text = render_table(["grading (step)", "p50", "p99", "p50 verify", "p99 verify", "answers/s",
                         "as expected", "flagged"], rows)
    text += ("\n(p50/p99: all answers; verify: the half that needs math-verify, "
             "i.e. not the verbatim or x = forms)")
    mem_rows = []
    for name, res in (("ours", ours), ("ref", ref)):
        m = _get(res, "memory")
        if m:
            mem_rows.append([name, str(res["num_envs"]), str(m["processes"]), fmt_mib(m["pss_bytes"]),
                             fmt_mib(m["process_pss_bytes"]), fmt_mib(m["children_pss_bytes"])])
    if mem_rows:
        text += "\n\n" + render_table(["memory", "envs", "processes", "PSS total", "env process",
                                       "grader processes"], mem_rows)
    ratio = _pss_ratio(ours, ref)
    if ratio is not None:
        text += f"\nPSS ours/ref: {fmt_ratio(ratio)} (target <= {PSS_TARGET:.2f})"
    if ref is None:
        text += f"\nreference: {ref_note or 'n/a'}"
    return text


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    ratio = _pss_ratio(ours, ref)
    rows = [{"target": "PSS of 32 math envs (with grader processes) <= 1/3 of the reference",
             "value": fmt_ratio(ratio) if ratio is not None else "n/a",
             "met": ratio <= PSS_TARGET if ratio is not None else None}]
    o_rate, r_rate = _get(ours, "concurrent", "answers_per_s"), _get(ref, "concurrent", "answers_per_s")
    if o_rate and r_rate:
        rows.append({"target": "graded answers/s with 8 threads >= the reference",
                     "value": f"{fmt_rate(o_rate)} vs {fmt_rate(r_rate)}", "met": o_rate >= r_rate})
    return rows
