"""Games: single-env random-policy steps/s, reset latency, and build time + memory for many envs."""

from __future__ import annotations

import gc
import json
import os
import random
import select
import time
from typing import Any

from common import (
    error_text,
    fmt_mib,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    render_table,
    rss_bytes,
    summarize,
)

NAME = "games"
TITLE = "single-env random-policy steps/s, reset latency, build time + memory of many envs"
ORDER = 30

PREFIX = "game:"
_MIN_BUILT_FOR_RSS = 8
NOTES = (
    "steps/s counts env.step() time only, not sampling the action or resets "
    "(ours bare: the unwrapped game, without make()'s wrappers); "
    "reset latency = reset(seed) with fresh seeds; build = make() called N times in a "
    "forked child, RSS delta measured there (the reference's constructors also reset)."
)


def _fallback_actions() -> dict[str, Any]:
    # Well-formed random actions for games whose `sample_random_action` is missing
    # on one side (the reference 0.1.0 lacks it for Sudoku and TowerofHanoi).
    def sudoku(rng: random.Random) -> str:
        row, col, value = (rng.randint(1, 9) for _ in range(3))
        return f"\\boxed{{{row} {col} {value}}}"

    def hanoi(rng: random.Random) -> str:
        src, dst = rng.sample("ABC", 2)
        return f"\\boxed{{{src} {dst}}}"

    return {"Sudoku": sudoku, "TowerofHanoi": hanoi}


FALLBACK_ACTIONS = _fallback_actions()


def add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("games benchmark")
    group.add_argument("--game", action="append", metavar="TEXT", dest="games",
                       help="only game ids containing TEXT (repeatable; default: every game:* id)")
    group.add_argument("--build-envs", type=int, default=None, metavar="N",
                       help="envs built for the build/memory figure (default 256, --quick 16)")


def config(args: Any) -> dict[str, Any]:
    quick = args.quick
    return {
        "env_ids": None,  # None: every `game:*` id of the backend's registry, found at run time
        "filters": args.games or [],
        "step_target_s": 0.05 if quick else 0.3,
        "step_trials": 1 if quick else 3,
        "reset_count": 10 if quick else 200,
        "reset_budget_s": 0.3 if quick else 3.0,
        "build_envs": args.build_envs or (16 if quick else 256),
        "build_budget_s": 2.0 if quick else 10.0,
        "interleaved_block_s": 0.02 if quick else 0.1,
        "interleaved_blocks": 2 if quick else 30,
    }


def reference_config(config: dict[str, Any], ours: dict[str, Any] | None) -> dict[str, Any] | None:
    """The reference measures exactly the game ids we measured (skipped when there are none)."""
    ids = sorted((ours or {}).get("games", {}))
    if not ids:
        return None
    return {**config, "env_ids": ids}


# Games whose reset costs more than this on either side keep their sequential ratio: every
# episode end inside a block resets, so a slow reset (the reference's Sokoban-hard takes
# seconds) would stretch each turn far past the block and hold up both workers.
_INTERLEAVED_MAX_RESET_S = 0.1


def interleaved_config(config: dict[str, Any], ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any] | None:
    """The interleaved phase steps every game both sides stepped and reset within 0.1 s, taking turns block by block."""
    reset_s: dict[str, float] = {}
    for env_id in sorted(ours.get("games", {})):
        if not (_get(ours, "games", env_id, "step", "steps_per_s") and _get(ref, "games", env_id, "step", "steps_per_s")):
            continue
        slowest = max(_get(side, "games", env_id, "reset", "mean_s") or 0.0 for side in (ours, ref))
        if slowest <= _INTERLEAVED_MAX_RESET_S:
            reset_s[env_id] = slowest
    if not reset_s:
        return None
    # Where one side has no sample_random_action, both play the same fallback actions, so
    # the two step through the same mix of moves (the reference 0.1.0 lacks it for Sudoku
    # and TowerofHanoi; our Sudoku's own samples stay in the board's range, the fallback's
    # do not).
    fallback = [
        env_id for env_id in reset_s
        if any(_get(side, "games", env_id, "step", "policy") not in (None, "sample_random_action") for side in (ours, ref))
    ]  # fmt: skip
    return {
        "env_ids": list(reset_s),
        "block_s": config["interleaved_block_s"],
        "blocks": config["interleaved_blocks"],
        "reset_s": reset_s,
        "fallback_ids": fallback,
    }


def timeout_s(config: dict[str, Any]) -> float:
    if "blocks" in config:  # the interleaved phase: both sides' turns, one after the other
        turns = 2 * (config["blocks"] + 1)
        resets = config.get("reset_s", {})
        return 120 + sum(turns * (config["block_s"] + 2 * resets.get(i, 0.0)) + 10 for i in config["env_ids"])
    count = len(config["env_ids"]) if config["env_ids"] is not None else 40
    per_game = (config["step_target_s"] * (config["step_trials"] + 1) + config["reset_budget_s"]
                + config["build_budget_s"] + 30)
    return 120 + count * per_game


# ----------------------------------------------------------------------------- measuring


def _game_name(env_id: str) -> str:
    return env_id[len(PREFIX):].split("-v", 1)[0]


def _policy(env: Any, env_id: str, fallback: bool = False) -> tuple[Any, str]:
    """``(function returning the next action, policy name)``; ``fallback``: the fallback actions even where the env samples its own."""
    if fallback and _game_name(env_id) in FALLBACK_ACTIONS:
        rng = random.Random(0)
        make_action = FALLBACK_ACTIONS[_game_name(env_id)]
        return (lambda: make_action(rng)), "fallback (both sides)"
    try:
        env.sample_random_action()
        return env.sample_random_action, "sample_random_action"
    except NotImplementedError:
        fallback = FALLBACK_ACTIONS.get(_game_name(env_id))
        if fallback is None:
            raise
        rng = random.Random(0)
        return (lambda: fallback(rng)), "fallback (sample_random_action not implemented)"


def _timed_steps(env: Any, policy: Any, duration_s: float, seed: int) -> tuple[int, float, int, int]:
    """Step ``env`` for ``duration_s`` of wall time, resetting at episode ends.

    Returns ``(steps, seconds inside env.step, episodes ended, next reset seed)``.
    """
    clock = time.perf_counter
    steps, step_time, episodes = 0, 0.0, 0
    deadline = clock() + duration_s
    while clock() < deadline:
        action = policy()
        start = clock()
        _, _, terminated, truncated, _ = env.step(action)
        step_time += clock() - start
        steps += 1
        if terminated or truncated:
            env.reset(seed=seed)
            seed += 1
            episodes += 1
    return steps, step_time, episodes, seed


def _step_rate(env: Any, env_id: str, config: dict[str, Any]) -> dict[str, Any]:
    env.reset(seed=0)
    policy, policy_name = _policy(env, env_id)
    seed = 1
    rates = []
    steps_total = episodes = 0
    for trial in range(config["step_trials"] + 1):  # trial 0 is the warm-up
        steps, step_time, ended, seed = _timed_steps(env, policy, config["step_target_s"], seed)
        if trial > 0:
            rates.append(steps / step_time)
            steps_total += steps
            episodes += ended
    rates.sort()
    return {
        "steps_per_s": rates[len(rates) // 2],
        "trials": rates,
        "steps": steps_total,
        "mean_episode_len": steps_total / episodes if episodes else None,
        "policy": policy_name,
    }


def _reset_latency(env: Any, config: dict[str, Any]) -> dict[str, Any]:
    samples = []
    budget_end = time.perf_counter() + config["reset_budget_s"]
    for i in range(config["reset_count"]):
        start = time.perf_counter()
        env.reset(seed=10_000 + i)
        samples.append(time.perf_counter() - start)
        if time.perf_counter() > budget_end and len(samples) >= 3:
            break
    return summarize(samples)


def _build(backend: Any, env_id: str, n: int, budget_s: float) -> dict[str, Any]:
    gc.collect()
    base = rss_bytes()
    envs = []
    start = time.perf_counter()
    for _ in range(n):
        envs.append(backend.make(env_id))
        if time.perf_counter() - start > budget_s:
            break
    build_s = time.perf_counter() - start
    gc.collect()
    delta = rss_bytes() - base
    built = len(envs)
    scale = n / built
    return {
        "num_envs": n,
        "built": built,
        "extrapolated": built < n,
        "build_s": build_s * scale,
        # a few envs' RSS change is mostly allocator noise: do not scale it up
        "rss_delta_bytes": delta * scale if built >= min(n, _MIN_BUILT_FOR_RSS) else None,
    }


def _build_isolated(backend: Any, env_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """`_build` in a forked child, so earlier measurements do not skew the memory delta."""
    n, budget = config["build_envs"], config["build_budget_s"]
    if not hasattr(os, "fork"):
        return _build(backend, env_id, n, budget)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            payload = _build(backend, env_id, n, budget)
        except BaseException as e:  # noqa: B036 - report anything, then exit the child
            payload = {"error": error_text(e)}
        os.write(write_fd, json.dumps(payload).encode())
        os._exit(0)
    os.close(write_fd)
    chunks = []
    deadline = time.monotonic() + budget * 3 + 60
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read_fd], [], [], max(left, 0))
            if not ready:
                os.kill(pid, 9)
                return {"error": f"building {n} envs did not finish within {budget * 3 + 60:.0f} s"}
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    if not chunks:
        return {"error": "the build child exited without a result"}
    return json.loads(b"".join(chunks))


def measure_interleaved(backend: Any, config: dict[str, Any], baton: Any) -> dict[str, Any]:
    """Wrapped steps/s of each game in blocks of ``block_s``, one block per turn of ``baton``.

    Run by both workers at once; each takes the same number of turns per game (one to build
    and warm up the env, then ``blocks`` timed ones) whatever fails, so the turns stay paired.
    """
    games: dict[str, Any] = {}
    for env_id in config["env_ids"]:
        entry: dict[str, Any] = {"rates": []}
        env = policy = None
        seed = 1
        with baton:  # untimed: build, reset, one warm-up block
            try:
                env = backend.make(env_id)
                env.reset(seed=0)
                policy, entry["policy"] = _policy(env, env_id, env_id in config.get("fallback_ids", ()))
                _, _, _, seed = _timed_steps(env, policy, config["block_s"], seed)
            except Exception as e:
                entry["error"] = error_text(e)
        for _ in range(config["blocks"]):
            with baton:
                if "error" in entry:
                    continue
                try:
                    steps, step_time, _, seed = _timed_steps(env, policy, config["block_s"], seed)
                    entry["rates"].append(steps / step_time)
                except Exception as e:
                    entry["error"] = error_text(e)
        if env is not None:
            try:
                backend.close(env)
            except Exception:
                pass
        rates = sorted(entry["rates"])
        entry["steps_per_s"] = rates[len(rates) // 2] if rates else None
        games[env_id] = entry
    return {"games": games, "block_s": config["block_s"], "blocks": config["blocks"]}


def interleaved_ratio(ours: dict[str, Any] | None, ref: dict[str, Any] | None, env_id: str) -> float | None:
    """Median over the paired blocks of ours/ref steps/s (block i of each side ran back to back)."""
    o = _get(ours, "interleaved", "games", env_id, "rates")
    r = _get(ref, "interleaved", "games", env_id, "rates")
    if not o or not r or len(o) != len(r):
        return None
    ratios = sorted(a / b for a, b in zip(o, r, strict=True))
    n = len(ratios)
    return ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2


def _interleaved_cell(ours: dict[str, Any] | None, ref: dict[str, Any] | None, env_id: str) -> str:
    ratio = interleaved_ratio(ours, ref, env_id)
    played = _get(ours, "interleaved", "games")
    stepped = all(_get(side, "games", env_id, "step", "steps_per_s") for side in (ours, ref))
    if ratio is None and played and env_id not in played and stepped:  # left out by interleaved_config
        return "n/a (slow reset)"
    return fmt_ratio(ratio)


def measure(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    ids = config["env_ids"]
    if ids is None:
        ids = [i for i in backend.env_ids() if i.startswith(PREFIX)]
    else:
        registered = set(backend.env_ids())
        ids = [i for i in ids if i in registered]
    if config["filters"]:
        ids = [i for i in ids if any(f.lower() in i.lower() for f in config["filters"])]
    games: dict[str, Any] = {}
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    for env_id in ids:
        entry: dict[str, Any] = {}
        game_start = time.perf_counter()
        try:
            start = time.perf_counter()
            env = backend.make(env_id)
            entry["make_s"] = time.perf_counter() - start
            try:
                entry["step"] = _step_rate(env, env_id, config)
                if env.unwrapped is not env:  # the game alone, without make()'s wrapper stack
                    entry["step_unwrapped"] = _step_rate(env.unwrapped, env_id, config)
                entry["reset"] = _reset_latency(env, config)
            finally:
                backend.close(env)
        except Exception as e:
            entry["error"] = error_text(e)
        entry["build"] = _build_isolated(backend, env_id, config)
        entry["wall_s"] = time.perf_counter() - game_start
        games[env_id] = entry
    load_end = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"games": games, "notes": NOTES, "loadavg": [load_start, load_end]}


# ----------------------------------------------------------------------------- reporting


def _get(entry: dict[str, Any] | None, *keys: str) -> Any:
    for key in keys:
        if not isinstance(entry, dict):
            return None
        entry = entry.get(key)
    return entry


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    o_games = (ours or {}).get("games", {})
    r_games = (ref or {}).get("games", {})
    ids = sorted(set(o_games) | set(r_games))
    if not ids:
        return "(no game:* ids registered yet; skipped)"
    steps, builds, errors = [], [], []
    for env_id in ids:
        o, r = o_games.get(env_id), r_games.get(env_id)
        o_rate, r_rate = _get(o, "step", "steps_per_s"), _get(r, "step", "steps_per_s")
        steps.append([
            env_id, fmt_rate(o_rate), fmt_rate(_get(o, "step_unwrapped", "steps_per_s")),
            fmt_rate(r_rate),
            fmt_ratio(o_rate / r_rate if o_rate and r_rate else None),
            _interleaved_cell(ours, ref, env_id),
            fmt_seconds(_get(o, "reset", "mean_s")), fmt_seconds(_get(o, "reset", "p99_s")),
            fmt_seconds(_get(r, "reset", "mean_s")), fmt_seconds(_get(r, "reset", "p99_s")),
        ])

        def build_cells(e: dict[str, Any] | None) -> list[str]:
            b = _get(e, "build")
            if not b or "error" in b:
                return ["n/a", "n/a"]
            mark = "~" if b["extrapolated"] else ""
            rss = b["rss_delta_bytes"]
            return [mark + fmt_seconds(b["build_s"]),
                    (mark + fmt_mib(rss)) if rss is not None else f"n/a ({b['built']} built)"]

        builds.append([env_id, *build_cells(o), *build_cells(r)])
        for label, e, side in (("ours", o, ours), ("ref", r, ref)):
            for message in dict.fromkeys((_get(e, "error"), _get(e, "build", "error"))):
                if message and "nltk.download" in message:
                    message = ("needs the NLTK 'words' corpus, which nltk downloads at run time "
                               "(not from PyPI); " + message.split(":")[0])
                if message:
                    errors.append(f"{label} {env_id}: {message}")
            message = _get(side, "interleaved", "games", env_id, "error")
            if message:
                errors.append(f"{label} {env_id} (interleaved): {message}")
            policy = _get(e, "step", "policy")
            if policy and policy != "sample_random_action":
                errors.append(f"{label} {env_id}: policy = {policy}")
    n = _get(ours, "games", ids[0], "build", "num_envs") or _get(ref, "games", ids[0], "build", "num_envs")
    text = render_table(["game", "ours steps/s", "ours bare", "ref steps/s", "ours/ref", "ours/ref interleaved",
                         "ours reset mean", "ours p99", "ref reset mean", "ref p99"], steps)
    text += "\n\n" + render_table(
        ["game", f"ours build {n}", "ours RSS delta", f"ref build {n}", "ref RSS delta"], builds)
    text += "\n~ = extrapolated from the envs built within the time budget. " + NOTES
    inter = _get(ours, "interleaved")
    if inter and "error" not in inter:
        text += (f"\ninterleaved: after both runs, the two workers ran at once and took turns: for each game "
                 f"{inter.get('blocks')} blocks of {inter.get('block_s')} s of wrapped steps per side, block i of "
                 "ours then block i of the reference; the ratio is the median of the blocks' ratios "
                 f"(the target uses it). Games whose reset takes over {_INTERLEAVED_MAX_RESET_S:g} s on "
                 "either side keep the sequential ratio (a reset inside a block would hold up both workers)")
    for label, side in (("ours", ours), ("ref", ref)):  # a failed phase too (e.g. its timeout)
        baton = _get(side, "interleaved", "baton") or {}
        why = baton.get("broken") or _get(side, "interleaved", "error")
        if why:
            text += f"\ninterleaved, {label}: the turns stopped alternating ({why}); its ratios are not paired"
    for line in errors:
        text += f"\n{line}"
    for label, side in (("ours", ours), ("ref", ref)):
        load = _get(side, "loadavg")
        if load and all(load):
            text += (f"\n{label}: load average (1/5/15 min) {'/'.join(f'{x:.2f}' for x in load[0])} "
                     f"at start, {'/'.join(f'{x:.2f}' for x in load[1])} at end")
    if ref_note:
        text += f"\nreference: {ref_note}"
    return text


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    o_games = (ours or {}).get("games", {})
    r_games = (ref or {}).get("games", {})
    if not o_games:
        return []
    ratios, paired = [], 0
    for env_id, entry in o_games.items():
        ratio = interleaved_ratio(ours, ref, env_id)
        if ratio is not None:
            paired += 1
        else:
            o_rate = _get(entry, "step", "steps_per_s")
            r_rate = _get(r_games.get(env_id), "step", "steps_per_s")
            ratio = o_rate / r_rate if o_rate and r_rate else None
        if ratio is not None:
            ratios.append((ratio, env_id))
    slower = [r for r in ratios if r[0] < 1]
    if ratios:
        worst = min(ratios)
        how = "interleaved" if paired == len(ratios) else f"{paired} interleaved, {len(ratios) - paired} sequential"
        speed = (f"{len(slower)} of {len(ratios)} slower ({how}); slowest ours/ref "
                 f"{fmt_ratio(worst[0])} ({worst[1]})")
    else:
        speed = "n/a"
    p99s = [(_get(e, "reset", "p99_s"), env_id) for env_id, e in o_games.items()
            if _get(e, "reset", "p99_s") is not None]
    worst_p99 = max(p99s) if p99s else None
    return [
        {"target": "no game slower per step than the reference", "value": speed,
         "met": not slower if ratios else None},
        {"target": "every game's reset p99 <= 200 ms",
         "value": f"worst {fmt_seconds(worst_p99[0])} ({worst_p99[1]})" if worst_p99 else "n/a",
         "met": worst_p99[0] <= 0.2 if worst_p99 else None},
    ]
