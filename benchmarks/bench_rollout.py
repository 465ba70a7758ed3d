"""Rollout engine benchmark: tokens re-encoded per episode by layout, and rollout throughput.

Run standalone (needs ``gem-core[rl]``)::

    python benchmarks/bench_rollout.py            # full
    python benchmarks/bench_rollout.py --quick    # ~30 s on 2 cores
    python benchmarks/bench_rollout.py --json out.json

1. **Tokens re-encoded per episode** as the number of turns grows, ``packed`` vs
   ``per_turn`` layout, with a scripted policy and constant-size observations. Packed
   encodes only each turn's delta (linear in the episode length); per-turn re-encodes
   the whole history every turn (quadratic).
2. **Rollout throughput** (episodes/s) with the tiny offline model
   (`gem_core.rl.testing.build_tiny_model`) on ``game:GuessTheNumber-v0-easy`` for 1 vs
   32 concurrent episodes. Torch runs on one thread (fastest for a tiny model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gem_core  # noqa: E402
import gem_core.rl as rl  # noqa: E402

__all__ = ["bench_encoding", "bench_throughput", "main"]


class FixedTurnsEnv(gem_core.Env):
    """Ends after ``num_turns`` turns; every observation has the same size."""

    def __init__(self, num_turns: int):
        self.num_turns = num_turns
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return (
            "You are playing Guess The Number. Find the hidden integer between 1 and 10 "
            "(inclusive). Give each guess as \\boxed{N}."
        ), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.num_turns
        obs = f"Turn {self.t % 10}: you guessed 5; the target is higher than 5. Enter your next guess."
        return obs, 0.0, done, False, {"success": done}


def bench_encoding(turns: list[int]) -> list[dict[str, Any]]:
    """Tokens encoded per episode (and formatter time) for each episode length and layout."""
    from transformers import AutoTokenizer

    from gem_core.rl.testing import TextPolicy, build_tiny_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_tokenizer(), local_files_only=True)
    formatter = rl.ChatFormatter(tokenizer, max_context=1_000_000)
    policy = TextPolicy(tokenizer, lambda text: "\\boxed{5}")
    rows = []
    for n in turns:
        row: dict[str, Any] = {"turns": n}
        for layout in ("packed", "per_turn"):
            env = FixedTurnsEnv(n)
            start = time.perf_counter()
            ep = asyncio.run(rl.run_episode(env, policy, formatter, seed=0, layout=layout))
            row[f"{layout}_s"] = time.perf_counter() - start
            assert ep.num_turns == n and ep.error is None, ep
            row[f"{layout}_tokens"] = int(ep.stats["tokens_encoded"])
        row["ratio"] = row["per_turn_tokens"] / row["packed_tokens"]
        row["packed_tokens_per_turn"] = row["packed_tokens"] / n
        rows.append(row)
    return rows


def bench_throughput(
    num_episodes: int, concurrencies: list[int], max_new_tokens: int
) -> list[dict[str, Any]]:
    """Episodes/s with the tiny model for each concurrency level."""
    import torch

    from gem_core.rl.testing import load_tiny_model

    torch.set_num_threads(1)
    model, tokenizer = load_tiny_model()
    formatter = rl.ChatFormatter(tokenizer, max_context=2048)
    sampling = rl.SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens, seed=0)
    kwargs = dict(
        seeds=list(range(num_episodes)), sampling=sampling, env_kwargs={"format_error": "retry"}
    )
    # Warm-up (first forward passes allocate).
    rl.collect_episodes_sync(
        "game:GuessTheNumber-v0-easy",
        rl.TransformersPolicy(model, tokenizer),
        formatter,
        seeds=[0, 1],
        sampling=sampling,
        max_turns=1,
    )
    rows = []
    for c in concurrencies:
        policy = rl.TransformersPolicy(model, tokenizer, max_batch_size=max(c, 1))
        start = time.perf_counter()
        episodes = rl.collect_episodes_sync(
            "game:GuessTheNumber-v0-easy", policy, formatter, concurrency=c, **kwargs
        )
        elapsed = time.perf_counter() - start
        assert all(ep.error is None for ep in episodes), [ep.error for ep in episodes if ep.error]
        turns = sum(ep.num_turns for ep in episodes)
        tokens = sum(ep.stats["generated_tokens"] for ep in episodes)
        rows.append(
            {
                "concurrency": c,
                "episodes": num_episodes,
                "seconds": elapsed,
                "episodes_per_s": num_episodes / elapsed,
                "turns_per_s": turns / elapsed,
                "generated_tokens_per_s": tokens / elapsed,
                "model_batches": policy.num_batches,
            }
        )
    return rows


def _table(rows: list[dict[str, Any]], cols: list[tuple[str, str, str]]) -> str:
    head = [h for _, h, _ in cols]
    body = [[format(r[k], f) for k, _, f in cols] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in body]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (~30 s on 2 cores)")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = parser.parse_args(argv)

    turns = [1, 2, 4, 8, 16] if args.quick else [1, 2, 4, 8, 16, 32, 64]
    enc = bench_encoding(turns)
    print("Tokens encoded per episode (scripted policy, constant-size observations)")
    print(
        _table(
            enc,
            [
                ("turns", "turns", "d"),
                ("packed_tokens", "packed", "d"),
                ("packed_tokens_per_turn", "packed/turn", ".1f"),
                ("per_turn_tokens", "per_turn", "d"),
                ("ratio", "per_turn/packed", ".1f"),
                ("packed_s", "packed s", ".4f"),
                ("per_turn_s", "per_turn s", ".4f"),
            ],
        )
    )
    n = 32
    thr = bench_throughput(n, [1, 32], max_new_tokens=16)
    print(
        f"\nRollout throughput: tiny model, {n} episodes of game:GuessTheNumber-v0-easy "
        "(format_error=retry, <= 4 turns), max_new_tokens=16, 1 torch thread"
    )
    print(
        _table(
            thr,
            [
                ("concurrency", "concurrent", "d"),
                ("seconds", "seconds", ".2f"),
                ("episodes_per_s", "episodes/s", ".2f"),
                ("turns_per_s", "turns/s", ".1f"),
                ("generated_tokens_per_s", "gen tokens/s", ".0f"),
                ("model_batches", "model batches", "d"),
            ],
        )
    )
    speedup = thr[-1]["episodes_per_s"] / thr[0]["episodes_per_s"]
    print(f"speed-up 32 vs 1 concurrent: {speedup:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"encoding": enc, "throughput": thr}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
