"""Vectorized stepping: steps/s of a raw loop over N envs vs the sync and async vector envs."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from common import (
    Unavailable,
    error_text,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    measure_rates,
    render_table,
)

NAME = "vector"
TITLE = "steps/s of a raw loop over N envs vs SyncVectorEnv vs AsyncVectorEnv (NEXT_STEP autoreset)"
ORDER = 20

# A cheap env, a CPU-heavy env, and the reference's cheapest game (measured on each
# side that registers it, so the reference's overheads appear in the same run).
DEFAULT_ENV_IDS = ["toy:Echo-v0", "toy:PrimeCount-v0", "game:GuessTheNumber-v0-easy"]

# A fixed action per env, wrong on purpose, so every episode runs to the same length
# on both implementations. Ids not listed use one `sample_random_action()` of a
# seeded env, repeated.
FIXED_ACTIONS = {
    "toy:Echo-v0": "0",
    "toy:PrimeCount-v0": "0",
    "game:GuessTheNumber-v0-easy": "\\boxed{999}",
    "game:GuessTheNumber-v0-hard": "\\boxed{999}",
}
MODES = ("raw", "sync", "async", "local")
# "local": AsyncVectorEnv(local_shard=True), the calling process stepping one shard itself
# (gem_core only; see its docstring for what that shard gives up).
_MAX_EPISODE = 10_000


def add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("vector benchmark")
    group.add_argument("--vector-env", action="append", metavar="ENV_ID", dest="vector_envs",
                       help=f"env id to vectorize (repeatable; default: {', '.join(DEFAULT_ENV_IDS)})")
    group.add_argument("--num-envs", type=int, action="append", metavar="N", dest="num_envs",
                       help="number of envs (repeatable; default: 8 64 256, --quick: 8)")


def config(args: Any) -> dict[str, Any]:
    quick = args.quick
    return {
        "env_ids": args.vector_envs or DEFAULT_ENV_IDS,
        "num_envs": args.num_envs or ([8] if quick else [8, 64, 256]),
        "target_s": 0.05 if quick else 0.4,
        "trials": 2 if quick else 5,
        "warmup_calls": 1 if quick else 2,
    }


def timeout_s(config: dict[str, Any]) -> float:
    return 120 + 300 * len(config["env_ids"]) * len(config["num_envs"])


# ----------------------------------------------------------------------------- measuring


def _fixed_action(backend: Any, env_id: str) -> str:
    if env_id in FIXED_ACTIONS:
        return FIXED_ACTIONS[env_id]
    env = backend.make(env_id)
    try:
        env.reset(seed=0)
        return env.sample_random_action()
    finally:
        backend.close(env)


def _episode_length(backend: Any, env_id: str, action: str) -> int:
    """Steps per episode under the fixed action (the longest of three seeded episodes)."""
    env = backend.make(env_id)
    try:
        longest = 0
        for seed in range(3):
            env.reset(seed=seed)
            length, done = 0, False
            while not done and length < _MAX_EPISODE:
                _, _, terminated, truncated, _ = env.step(action)
                length += 1
                done = terminated or truncated
            longest = max(longest, length)
        return longest
    finally:
        backend.close(env)


def _raw_loop(envs: list[Any], actions: list[str]) -> Callable[[], None]:
    """One "vector step" done by hand: step each env, resetting on the step after it ends."""
    pairs = list(zip(envs, actions, strict=True))
    needs_reset = [False] * len(pairs)

    def call() -> None:
        for i, (env, action) in enumerate(pairs):
            if needs_reset[i]:
                env.reset()
                needs_reset[i] = False
            else:
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    needs_reset[i] = True

    return call


def _build(backend: Any, env_id: str, n: int, mode: str, actions: list[str]):
    """``(call, cleanup, build_s)`` for one mode: ``call()`` does one vector step."""
    if mode == "raw":
        start = time.perf_counter()
        envs = [backend.make(env_id) for _ in range(n)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        build_s = time.perf_counter() - start

        def cleanup() -> None:
            for env in envs:
                backend.close(env)

        return _raw_loop(envs, actions), cleanup, build_s
    backend.load_vector()  # its import is not part of the build time
    start = time.perf_counter()
    vec = backend.make_vec(env_id, n, mode)
    try:
        backend.reset_vec(vec, seed=0)
    except BaseException:
        backend.close_vec(vec)
        raise
    build_s = time.perf_counter() - start

    def call() -> None:
        vec.step(actions)

    return call, (lambda: backend.close_vec(vec)), build_s


def _measure_row(backend: Any, env_id: str, n: int, action: str, cycle: int,
                 config: dict[str, Any], skip: dict[str, str]) -> dict[str, Any]:
    """Every mode for one (env, N): built side by side, then measured in interleaved trials."""
    row: dict[str, Any] = {}
    built: dict[str, tuple[Any, int]] = {}
    cleanups = []
    try:
        for mode in MODES:
            if mode in skip:
                row[mode] = {"error": skip[mode]}
                continue
            try:
                call, cleanup, build_s = _build(backend, env_id, n, mode, [action] * n)
            except Unavailable as e:
                if mode == "local":  # only this mode is missing there
                    row[mode] = {"error": str(e)}
                    continue
                skip.update({m: str(e) for m in MODES if m != "raw"})
                row[mode] = {"error": str(e)}
                continue
            except Exception as e:
                row[mode] = {"error": error_text(e)}
                continue
            cleanups.append(cleanup)
            built[mode] = (call, n)
            row[mode] = {"build_s": build_s}
        try:
            rates = measure_rates(built, target_s=config["target_s"], trials=config["trials"],
                                  warmup_calls=config["warmup_calls"], calls_multiple=cycle)
        except Exception as e:  # a vector env failing mid-run: report it, keep the others' data
            rates = {}
            for mode in built:
                row[mode]["error"] = error_text(e)
        for mode, rate in rates.items():
            row[mode].update(rate)
    finally:
        for cleanup in cleanups:
            cleanup()
    row["ratios"] = _ratios(row)
    return row


def measure(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    registered = set(backend.env_ids())
    result: dict[str, Any] = {"autoreset": "NEXT_STEP", "envs": {}, "skipped": {},
                              "loadavg_start": _load()}
    skip: dict[str, str] = {}  # mode -> why (once the vector module is known to be missing)
    for env_id in config["env_ids"]:
        if env_id not in registered:
            result["skipped"][env_id] = "not registered"
            continue
        action = _fixed_action(backend, env_id)
        episode_len = _episode_length(backend, env_id, action)
        cycle = episode_len + 1  # NEXT_STEP: the step after the last one is a reset
        by_n = {str(n): _measure_row(backend, env_id, n, action, cycle, config, skip)
                for n in config["num_envs"]}
        result["envs"][env_id] = {"action": action, "episode_len": episode_len, "by_num_envs": by_n}
    result["loadavg_end"] = _load()
    return result


def _load() -> float | None:
    """The 1-minute load average (the machine's load beside the figures)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _rate(row: dict[str, Any], mode: str) -> float | None:
    return row.get(mode, {}).get("steps_per_s")


def _ratios(row: dict[str, Any]) -> dict[str, float | None]:
    raw, sync, async_ = _rate(row, "raw"), _rate(row, "sync"), _rate(row, "async")
    local = _rate(row, "local")
    return {
        # overhead: how many times longer a step takes than in the raw loop (lower is better)
        "sync_overhead": raw / sync if raw and sync else None,
        "async_overhead": raw / async_ if raw and async_ else None,
        # throughput of async relative to sync (higher is better)
        "async_over_sync": async_ / sync if sync and async_ else None,
        "local_overhead": raw / local if raw and local else None,
        "local_over_sync": local / sync if sync and local else None,
    }


# ----------------------------------------------------------------------------- reporting


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    sides = [("ours", ours), ("ref", ref)]
    env_ids: list[str] = []
    for _, side in sides:
        for env_id in (side or {}).get("envs", {}):
            if env_id not in env_ids:
                env_ids.append(env_id)
    rows = []
    errors: dict[str, set[str]] = {}
    for env_id in env_ids:
        ns: list[str] = []
        for _, side in sides:
            for n in (side or {}).get("envs", {}).get(env_id, {}).get("by_num_envs", {}):
                if n not in ns:
                    ns.append(n)
        for n in sorted(ns, key=int):
            for label, side in sides:
                row = (side or {}).get("envs", {}).get(env_id, {}).get("by_num_envs", {}).get(n)
                if row is None:
                    continue
                for mode in MODES:
                    if "error" in row.get(mode, {}) and not (mode == "local" and label == "ref"):
                        errors.setdefault(label, set()).add(f"{mode}: {row[mode]['error']}")
                r = row["ratios"]
                rows.append([
                    env_id, n, label,
                    fmt_rate(_rate(row, "raw")), fmt_rate(_rate(row, "sync")), fmt_rate(_rate(row, "async")),
                    fmt_ratio(r["sync_overhead"]), fmt_ratio(r["async_overhead"]),
                    fmt_ratio(r["async_over_sync"]),
                    fmt_rate(_rate(row, "local")), fmt_ratio(r.get("local_overhead")),
                    fmt_ratio(r.get("local_over_sync")),
                    fmt_seconds(row.get("async", {}).get("build_s")),
                ])
    header = ["env", "N", "impl", "raw/s", "sync/s", "async/s", "sync ovh", "async ovh",
              "async/sync", "local/s", "local ovh", "local/sync", "async build"]
    text = render_table(header, rows) if rows else "(nothing measured)"
    text += (
        "\novh = raw-loop steps/s divided by the vector env's (lower is better); async/sync = throughput ratio."
        "\nlocal = AsyncVectorEnv(local_shard=True): the calling process steps one shard itself (ours only)."
    )
    for env_id in env_ids:
        parts = [f"{label} {side['envs'][env_id]['episode_len']}" for label, side in sides
                 if side and env_id in side.get("envs", {})]
        action = next(side["envs"][env_id]["action"] for _, side in sides
                      if side and env_id in side.get("envs", {}))
        text += f"\n{env_id}: fixed action {action!r}, episode length {', '.join(parts)}"
    for label, side in sides:
        skipped = sorted((side or {}).get("skipped", {}))
        if skipped:
            text += f"\n{label}: not registered there: {', '.join(skipped)}"
        for message in sorted(errors.get(label, ())):
            text += f"\n{label}: n/a {message}"
    for label, side in sides:
        if side and side.get("loadavg_start") is not None:
            text += (f"\n{label}: 1-min load {side['loadavg_start']:.2f} at the start, "
                     f"{side.get('loadavg_end') or 0:.2f} at the end ({os.cpu_count()} CPUs)")
    if ref_note:
        text += f"\nreference: {ref_note}"
    return text


CHEAP_ENV, HEAVY_ENV = "toy:Echo-v0", "toy:PrimeCount-v0"


CHEAP_ENVS = [CHEAP_ENV, "game:GuessTheNumber-v0-easy"]


def _worst(ours: dict[str, Any] | None, key: str, env_ids: list[str] | None, lowest: bool,
           sizes: tuple[str, ...] | None = None) -> tuple[float | None, str]:
    found = []
    for env_id, entry in (ours or {}).get("envs", {}).items():
        if env_ids is not None and env_id not in env_ids:
            continue
        for n, row in entry["by_num_envs"].items():
            if sizes is not None and n not in sizes:
                continue
            value = row["ratios"].get(key)
            if value is not None:
                found.append((value, f"{env_id} N={n}"))
    if not found:
        return None, ""
    return min(found) if lowest else max(found)


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Issue 35's targets (the CPU-heavy one holds on a quiet machine: see the load line)."""
    rows = []
    load = (ours or {}).get("loadavg_start")
    quiet = "" if load is None else f", load {load:.1f}"
    for text, key, env_ids, lowest, bound, sizes in (
        ("sync overhead <= 1.1x raw loop (worst env, N)", "sync_overhead", None, False, 1.1, None),
        ("async, local shard: overhead <= 2x raw, cheap envs, N = 8", "local_overhead",
         CHEAP_ENVS, False, 2.0, ("8",)),
        ("async, default (all shards in workers): overhead <= 2x raw, cheap envs, N = 8",
         "async_overhead", CHEAP_ENVS, False, 2.0, ("8",)),
        ("async, local shard: overhead <= 1.3x raw, cheap envs, N = 64 and 256", "local_overhead",
         CHEAP_ENVS, False, 1.3, ("64", "256")),
        ("async, default: overhead <= 1.3x raw, cheap envs, N = 64 and 256", "async_overhead",
         CHEAP_ENVS, False, 1.3, ("64", "256")),
        (f"async, default: >= 1.8x sync throughput, CPU-heavy env ({HEAVY_ENV}, worst N{quiet})",
         "async_over_sync", [HEAVY_ENV], True, 1.8, None),
        (f"async, local shard: >= 1.8x sync throughput, CPU-heavy env ({HEAVY_ENV}, worst N{quiet})",
         "local_over_sync", [HEAVY_ENV], True, 1.8, None),
    ):
        value, where = _worst(ours, key, env_ids, lowest, sizes)
        met = None if value is None else (value >= bound if lowest else value <= bound)
        rows.append({"target": text, "value": f"{fmt_ratio(value)} ({where})" if where else "n/a",
                     "met": met})
    return rows
