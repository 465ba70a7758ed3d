"""The `gem` command line: list envs, play one in the terminal, run the benchmarks, build search indexes."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import TextIO

__all__ = ["main", "play"]


def _cmd_list(args: argparse.Namespace) -> int:
    from gem_core.registration import registry

    pattern = (args.pattern or "").lower()
    rows = [s for s in registry.values() if pattern in s.id.lower()]
    if not rows:
        print(f"no env id contains {args.pattern!r}; run `gem list` to see every id", file=sys.stderr)
        return 1
    width = max(len(s.id) for s in rows)
    for s in sorted(rows, key=lambda s: s.id):
        where = "offline" if s.offline else "online"
        print(f"{s.id:<{width}}  {s.category or '-':<6}  {where:<7}  {s.description}".rstrip())
    return 0


def play(
    env_id: str,
    *,
    seed: int | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    **kwargs,
) -> bool:
    """A human plays one episode of ``env_id`` in the terminal; returns success.

    Each observation is printed, one action is read per line (``:q`` quits, ``:r`` plays
    a random action), and the reward and the outcome are reported.
    """
    import gem_core

    inp = stdin or sys.stdin
    out = stdout or sys.stdout
    env = gem_core.make(env_id, **kwargs)
    try:
        obs, _ = env.reset(seed=seed)
        total = 0.0
        while True:
            print(f"\n{obs}\n", file=out)
            print("your action> ", end="", file=out, flush=True)
            line = inp.readline()
            if not line or line.strip() == ":q":
                print("\nquit.", file=out)
                return False
            action = line.rstrip("\n")
            if action.strip() == ":r":
                action = env.sample_random_action()
                print(f"(random action: {action})", file=out)
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            print(f"reward {float(reward):+.3f} (total {total:+.3f})", file=out)
            if terminated or truncated:
                print(f"\n{obs}\n", file=out)
                success = bool(info.get("success", False))
                end = "terminated" if terminated else "truncated (turn limit)"
                print(f"episode {end}: {'SUCCESS' if success else 'not solved'}; "
                      f"return {total:+.3f}", file=out)
                return success
    finally:
        env.close()


def _cmd_play(args: argparse.Namespace) -> int:
    from gem_core.errors import Error

    try:
        play(args.env_id, seed=args.seed)
    except Error as e:
        print(f"gem play: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        return 130
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"
    if not script.exists():
        print("gem bench runs benchmarks/run.py from a source checkout of gem-core; "
              "it is not part of the installed package.", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, str(script), *args.bench_args])


def _cmd_index_help(args: argparse.Namespace) -> int:
    args.help_parser.print_help()
    return 2


def _cmd_index_build(args: argparse.Namespace) -> int:
    from gem_core.errors import Error
    from gem_core.search.index import build_index

    try:
        stats = build_index(args.corpus, args.index, batch_size=args.batch_size, overwrite=args.overwrite)
    except (Error, OSError) as e:
        print(f"gem index build: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; no index written.", file=sys.stderr)
        return 130
    print(f"indexed {stats.num_docs} passages into {stats.path} "
          f"({stats.size_bytes / 2**20:.1f} MiB) in {stats.seconds:.2f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gem", description="GEM: environments for agentic LLMs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="list registered env ids", description="List registered env ids "
                       "with their family, whether they work offline, and a description.")
    p.add_argument("pattern", nargs="?", help="only ids containing this text (case-insensitive)")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("play", help="play an env in the terminal",
                       description="Play one episode: type an action per line; ':r' plays a random "
                       "action, ':q' quits.")
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-easy")
    p.add_argument("--seed", type=int, default=None, help="episode seed")
    p.set_defaults(func=_cmd_play)

    p = sub.add_parser("bench", help="run the benchmarks (source checkout)",
                       description="Run benchmarks/run.py; extra arguments are passed through.")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="arguments for benchmarks/run.py")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("index", help="search indexes (build)",
                       description="Manage SQLite FTS5/BM25 indexes for gem_core.tools.SearchTool.")
    index_sub = p.add_subparsers(dest="index_command", metavar="SUBCOMMAND")
    p.set_defaults(func=_cmd_index_help, help_parser=p)
    b = index_sub.add_parser("build", help="build an index from a JSON-lines corpus",
                             description="Build a search index (one .sqlite file) from a JSON-lines "
                             "corpus: one object a line with 'id', 'title', 'text' (or Search-R1's "
                             "'contents' = \"title\\ntext\"); .jsonl.gz is read too. Streams the "
                             "corpus; the index appears only when complete.")
    b.add_argument("corpus", help="corpus file (.jsonl or .jsonl.gz)")
    b.add_argument("index", help="index file to write, e.g. wiki.sqlite")
    b.add_argument("--batch-size", type=int, default=10_000, help="rows per insert batch (default 10000)")
    b.add_argument("--no-overwrite", dest="overwrite", action="store_false",
                   help="fail if the index file exists (default: replace it)")
    b.set_defaults(func=_cmd_index_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
