"""Search benchmark: FTS5 index build time, BM25 query latency p50/p99 and SearchTool calls/s.

Run standalone (standard library only)::

    python benchmarks/bench_search.py            # 100k documents
    python benchmarks/bench_search.py --quick    # 5k documents, a few seconds
    python benchmarks/bench_search.py --json out.json

The corpus is synthetic and deterministic (seed 0): a vocabulary of pronounceable
pseudo-words drawn with Zipf-like frequencies (so posting lists are as skewed as in
natural text), titles of 2-5 words and bodies of 40-100 words (about the size of the
100-word Wikipedia passages of Search-R1 corpora). It is written to a JSON-lines file
first (not timed); the build then streams that file through `gem_core.search.build_index`.
Queries are 2-6 words drawn the same way. Measured:

1. **Build**: wall time, documents/s and index size.
2. **Query latency**: `SearchIndex.search(query, topk=3)` one at a time, p50/p99/mean.
3. **Pruning agreement**: on a sample, how often the default (pruned, see
   `gem_core.search.SearchIndex`) top-1 and top-3 equal those of unpruned BM25.
4. **Tool calls/s**: `SearchTool.parse` + `execute` on a ``<search>`` action, with 1 and
   4 caller threads (each thread has its own read-only SQLite connection).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from itertools import accumulate
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gem_core.search import SearchIndex, build_index  # noqa: E402
from gem_core.tools import SearchTool  # noqa: E402

__all__ = ["make_vocabulary", "write_corpus", "bench_build", "bench_queries", "bench_agreement", "bench_tool",
           "main"]

_ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl sh st th tr".split()
_VOWELS = "a e i o u ai ea io ou".split()


def make_vocabulary(size: int, rng: random.Random) -> list[str]:
    """``size`` distinct pseudo-words of 2-4 syllables."""
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(2, 4)
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)))
    return sorted(words)


def _zipf_cum_weights(n: int, s: float = 1.0) -> list[float]:
    return list(accumulate(1.0 / (rank ** s) for rank in range(1, n + 1)))


def write_corpus(path: Path, num_docs: int, vocab: list[str], rng: random.Random) -> None:
    """Write ``num_docs`` synthetic passages as JSON lines (``id``, ``title``, ``text``)."""
    cum = _zipf_cum_weights(len(vocab))
    with open(path, "w", encoding="utf-8") as f:
        for i in range(num_docs):
            title = " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(2, 5))).title()
            text = " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(40, 100))) + "."
            f.write(json.dumps({"id": f"doc{i}", "title": title, "text": text}) + "\n")


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]

    return {"n": len(samples), "p50_s": pct(50), "p99_s": pct(99), "mean_s": statistics.fmean(samples),
            "max_s": ordered[-1]}


def bench_build(corpus: Path, index: Path) -> dict[str, Any]:
    """Build the index from the corpus file; time, rate and size."""
    stats = build_index(corpus, index)
    return {"num_docs": stats.num_docs, "seconds": stats.seconds, "docs_per_s": stats.num_docs / stats.seconds,
            "index_mib": stats.size_bytes / 2**20, "corpus_mib": corpus.stat().st_size / 2**20}


def _queries(n: int, vocab: list[str], rng: random.Random) -> list[str]:
    cum = _zipf_cum_weights(len(vocab))
    return [" ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(2, 6))) for _ in range(n)]


def bench_queries(index: Path, queries: list[str], topk: int = 3) -> dict[str, Any]:
    """Latency of `SearchIndex.search` one query at a time (after 50 warm-up queries)."""
    with SearchIndex(index) as idx:
        for q in queries[:50]:
            idx.search(q, topk)
        samples, hits = [], 0
        for q in queries:
            start = time.perf_counter()
            found = idx.search(q, topk)
            samples.append(time.perf_counter() - start)
            hits += bool(found)
    return {**_stats(samples), "topk": topk, "queries_with_hits": hits}


def bench_agreement(index: Path, queries: list[str], topk: int = 3) -> dict[str, Any]:
    """How often pruned search (the default) returns the exact BM25 top-1 and top-k set.

    Exact = every query term matched, no pruning (what FTS5 alone would return); slow
    with common words, so run on a sample.
    """
    from gem_core.search.index import sanitize_query

    top1 = same_set = 0
    exact_s: list[float] = []
    with SearchIndex(index) as idx:
        con = idx._connection()
        for q in queries:
            start = time.perf_counter()
            exact = [r[0] for r in con.execute(
                "SELECT doc_id FROM passages WHERE passages MATCH ? ORDER BY rank LIMIT ?",
                (sanitize_query(q), topk))]
            exact_s.append(time.perf_counter() - start)
            pruned = [p.id for p in idx.search(q, topk)]
            top1 += bool(exact) and bool(pruned) and exact[0] == pruned[0]
            same_set += set(exact) == set(pruned)
    n = len(queries)
    return {"queries": n, "top1_agreement": top1 / n, "topk_set_agreement": same_set / n,
            "unpruned_p50_s": _stats(exact_s)["p50_s"]}


def bench_tool(index: Path, queries: list[str], threads: int, seconds: float) -> dict[str, Any]:
    """SearchTool calls/s (parse + execute) with ``threads`` concurrent callers for ``seconds``."""
    actions = [f"<think>I should look this up.</think>\n<search>{q}</search>" for q in queries]
    counts = [0] * threads
    stop = threading.Event()
    with SearchTool(index) as tool:
        for a in actions[:20]:
            tool.execute(tool.parse(a))

        def caller(k: int) -> None:
            i = k
            while not stop.is_set():
                result = tool.execute(tool.parse(actions[i % len(actions)]))
                assert not result.error, result.observation
                counts[k] += 1
                i += threads

        workers = [threading.Thread(target=caller, args=(k,)) for k in range(threads)]
        start = time.perf_counter()
        for w in workers:
            w.start()
        time.sleep(seconds)
        stop.set()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - start
    return {"threads": threads, "calls": sum(counts), "seconds": elapsed, "calls_per_s": sum(counts) / elapsed}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5k documents instead of 100k (seconds)")
    parser.add_argument("--docs", type=int, default=None, help="number of documents (overrides --quick)")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = parser.parse_args(argv)

    num_docs = args.docs or (5_000 if args.quick else 100_000)
    num_queries = 500 if args.quick else 2_000
    tool_seconds = 1.0 if args.quick else 3.0
    rng = random.Random(0)
    vocab = make_vocabulary(20_000 if not args.quick else 5_000, rng)
    with tempfile.TemporaryDirectory(prefix="gem-bench-search-") as tmp:
        corpus, index = Path(tmp) / "corpus.jsonl", Path(tmp) / "index.sqlite"
        start = time.perf_counter()
        write_corpus(corpus, num_docs, vocab, rng)
        gen_s = time.perf_counter() - start
        build = bench_build(corpus, index)
        queries = _queries(num_queries, vocab, rng)
        latency = bench_queries(index, queries)
        agreement = bench_agreement(index, queries[: 50 if args.quick else 100])
        tool = [bench_tool(index, queries, n, tool_seconds) for n in (1, 4)]

    print(f"Synthetic corpus: {num_docs} documents, {len(vocab)}-word Zipf vocabulary, "
          f"{build['corpus_mib']:.1f} MiB JSON lines (generated in {gen_s:.1f} s, not timed)")
    print(f"build:   {build['seconds']:.2f} s ({build['docs_per_s']:,.0f} docs/s), "
          f"index {build['index_mib']:.1f} MiB")
    print(f"query:   p50 {_ms(latency['p50_s'])}, p99 {_ms(latency['p99_s'])}, mean {_ms(latency['mean_s'])} "
          f"over {latency['n']} queries of 2-6 words, topk={latency['topk']} "
          f"({latency['queries_with_hits']} with hits)")
    print(f"pruning: top-1 equals unpruned BM25 for {agreement['top1_agreement']:.0%}, top-3 set for "
          f"{agreement['topk_set_agreement']:.0%} of {agreement['queries']} queries "
          f"(unpruned p50 {_ms(agreement['unpruned_p50_s'])})")
    for row in tool:
        print(f"tool:    {row['calls_per_s']:,.0f} calls/s with {row['threads']} thread(s) "
              f"(SearchTool.parse + execute)")
    if args.json:
        result = {"num_docs": num_docs, "vocabulary": len(vocab), "generate_s": gen_s, "build": build,
                  "query_latency": latency,
                  "pruning_agreement": agreement, "tool": tool}
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
