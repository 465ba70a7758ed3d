"""The embedded search backend: an SQLite FTS5 index with BM25 ranking, its builder and query sanitiser.

An index is one ``.sqlite`` file holding an FTS5 table ``passages(doc_id UNINDEXED,
title, text)`` and a ``meta`` table (format version, document count, source corpus).
`build_index` streams a JSON-lines corpus into it in batches; `SearchIndex` answers
queries read-only, one connection per thread.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core._closing import Closing
from gem_core.errors import InvalidArgument
from gem_core.search.base import Passage, SearchBackendError, split_contents

__all__ = [
    "FORMAT_VERSION",
    "IndexStats",
    "SearchIndex",
    "build_index",
    "default_corpus_path",
    "default_index",
    "iter_corpus",
    "query_terms",
    "sanitize_query",
]

FORMAT_VERSION = "1"
"""Bumped when the index schema changes; `SearchIndex` refuses other versions."""

MAX_QUERY_CHARS = 2000
"""Characters of a query kept for searching (the rest is ignored)."""

MAX_QUERY_TERMS = 32
"""Distinct terms of a query kept for searching (the first ones)."""

# Title matches count twice as much as body matches (doc_id is unindexed: weight 0).
_RANK = "bm25(0.0, 2.0, 1.0)"

_TOKEN = re.compile(r"\w+", re.UNICODE)

# Words too common to help BM25; dropped unless the query has nothing else.
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how i in is it its "
    "of on or she that the their there they this to was were what when where which who whom "
    "whose why will with you your".split()
)


def query_terms(text: str) -> list[str]:
    """The search terms of free text: its words, lower-cased, de-duplicated, in order.

    Words are runs of letters and digits of any script. Common English stopwords are
    dropped unless the text has no other word. Only the first `MAX_QUERY_CHARS`
    characters and `MAX_QUERY_TERMS` terms count, bounding the cost of a query.
    """
    if not isinstance(text, str):
        return []
    terms: list[str] = []
    seen: set[str] = set()
    for match in _TOKEN.finditer(text[:MAX_QUERY_CHARS]):
        term = match.group(0).lower()
        if term not in seen:
            seen.add(term)
            terms.append(term)
    content = [t for t in terms if t not in _STOPWORDS] or terms
    return content[:MAX_QUERY_TERMS]


def _match_expression(terms: list[str]) -> str:
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def sanitize_query(text: str) -> str | None:
    """Turn free text into a safe FTS5 query, or ``None`` when it has nothing to search.

    The `query_terms` of ``text`` are each quoted as an FTS5 string and joined with
    ``OR`` (BM25 ranks passages matching more terms higher). FTS5 operators in the text
    (``AND``, ``NEAR``, ``*``, ``"``, parentheses, column filters) thus become plain
    words or vanish, so no user text can cause an FTS5 syntax error.

    Args:
        text: the agent's query.

    Returns:
        The FTS5 ``MATCH`` expression, or ``None`` if ``text`` holds no word.
    """
    terms = query_terms(text)
    return _match_expression(terms) if terms else None


# ----------------------------------------------------------------------------- corpus


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")  # type: ignore[return-value]
    return open(path, encoding="utf-8")


def _record(obj: Any, where: str, lineno: int) -> tuple[str, str, str]:
    if not isinstance(obj, dict):
        raise InvalidArgument(f"{where}:{lineno}: expected a JSON object with 'text' or 'contents', "
                              f"got {type(obj).__name__}")
    doc_id = obj.get("id", obj.get("_id", obj.get("docid")))
    doc_id = str(lineno) if doc_id is None else str(doc_id)
    if "text" in obj or "title" in obj:
        title, text = obj.get("title") or "", obj.get("text") or ""
    elif "contents" in obj:
        title, text = split_contents(str(obj["contents"] or ""))
    else:
        raise InvalidArgument(f"{where}:{lineno}: expected the keys 'id', 'title', 'text' (or "
                              f"'contents' = \"title\\ntext\"), got keys {sorted(obj)[:8]}")
    if not isinstance(title, str) or not isinstance(text, str):
        raise InvalidArgument(f"{where}:{lineno}: 'title' and 'text' must be strings")
    return doc_id, title, text


def iter_corpus(path: str | os.PathLike[str]) -> Iterator[tuple[str, str, str]]:
    """Stream ``(id, title, text)`` from a JSON-lines corpus (``.jsonl`` or ``.jsonl.gz``).

    Each line is an object with ``id``, ``title`` and ``text``, or Search-R1 style with
    ``id`` and ``contents`` = ``"title\\ntext"``. Blank lines are skipped; a missing id
    becomes the line number.

    Raises:
        InvalidArgument: a line is not valid JSON or lacks the text (the message names
            the file and line).
    """
    path = Path(path)
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidArgument(f"{path}:{lineno}: not valid JSON ({e.msg}); "
                                      "the corpus must have one JSON object a line") from None
            yield _record(obj, str(path), lineno)


# ----------------------------------------------------------------------------- build


def _common_df(num_docs: int) -> int:
    """Terms in at least this many passages get their document frequency stored."""
    return max(16, num_docs // 2000)


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What `build_index` did.

    Attributes:
        path: the index file written.
        num_docs: passages indexed.
        seconds: wall time of the build.
        size_bytes: size of the index file.
    """

    path: Path
    num_docs: int
    seconds: float
    size_bytes: int


def _batches(rows: Iterable[tuple[str, str, str]], size: int) -> Iterator[list[tuple[str, str, str]]]:
    batch: list[tuple[str, str, str]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def build_index(
    corpus: str | os.PathLike[str] | Iterable[tuple[str, str, str]],
    index: str | os.PathLike[str],
    *,
    batch_size: int = 10_000,
    overwrite: bool = True,
) -> IndexStats:
    """Build an FTS5/BM25 index file from a corpus, streaming (the corpus is never all in memory).

    The index is written to a temporary file next to ``index`` and renamed into place at
    the end, so readers never see a half-built index and concurrent builders do not
    clash.

    Args:
        corpus: a JSON-lines file (see `iter_corpus`) or an iterable of ``(id, title, text)``.
        index: the ``.sqlite`` file to write.
        batch_size: rows per ``INSERT`` batch.
        overwrite: replace an existing ``index``; if ``False`` an existing file is an error.

    Returns:
        `IndexStats` of the build.

    Raises:
        InvalidArgument: bad arguments or a malformed corpus line.
        FileNotFoundError: the corpus file does not exist.
    """
    if batch_size < 1:
        raise InvalidArgument(f"batch_size must be >= 1, got {batch_size}")
    start = time.perf_counter()
    target = Path(index)
    if target.exists() and not overwrite:
        raise InvalidArgument(f"index {target} already exists; delete it or pass overwrite=True (CLI: drop --no-overwrite)")
    if isinstance(corpus, (str, os.PathLike)):
        source = str(corpus)
        if not Path(corpus).is_file():
            raise FileNotFoundError(f"corpus file {source!r} does not exist")
        rows: Iterable[tuple[str, str, str]] = iter_corpus(corpus)
    else:
        source, rows = "<iterable>", corpus
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    count = 0
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            con.execute("PRAGMA cache_size=-65536")
            con.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            con.execute("CREATE VIRTUAL TABLE passages USING fts5("
                        "doc_id UNINDEXED, title, text, tokenize='unicode61 remove_diacritics 2')")
            con.execute("INSERT INTO passages(passages, rank) VALUES('rank', ?)", (_RANK,))
            for batch in _batches(rows, batch_size):
                con.execute("BEGIN")
                con.executemany("INSERT INTO passages(doc_id, title, text) VALUES (?, ?, ?)", batch)
                con.execute("COMMIT")
                count += len(batch)
            con.execute("INSERT INTO passages(passages) VALUES('optimize')")
            # Document frequencies of the common terms, for query pruning (see SearchIndex).
            con.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, passages, row)")
            con.execute("CREATE TABLE terms(term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID")
            con.execute("INSERT INTO terms SELECT term, doc FROM temp.vocab WHERE doc >= ?",
                        (_common_df(count),))
            meta = {"format_version": FORMAT_VERSION, "num_docs": str(count), "source": source,
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "sqlite": sqlite3.sqlite_version}
            con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        finally:
            con.close()
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return IndexStats(target, count, time.perf_counter() - start, target.stat().st_size)


# ----------------------------------------------------------------------------- query


class SearchIndex(Closing):
    """Read-only BM25 search over an index file built by `build_index`.

    Thread-safe: each thread gets its own read-only connection (SQLite releases the GIL
    while it searches, so threads query in parallel).

    Query pruning. FTS5 scores every passage that matches any query term, so a query
    with a very common word costs time in proportion to the corpus. Two rules bound it:

    1. Terms found in half the passages or more are dropped: FTS5's ``bm25()`` gives
       them an IDF of 1e-6, so they cannot change the ranking (exact). A query made
       only of such terms returns the first passages holding the rarest of them
       (their BM25 scores would all be ~0 anyway).
    2. If the remaining terms together still match more than ``max_scan_rows``
       passages (by their stored document frequencies), the most common terms are
       dropped until they fit, always keeping the rarest one. This is approximate: a
       passage that matches only the dropped common words is no longer a candidate,
       and the dropped words no longer add to the scores of the others. ``None``
       disables it.

    Args:
        path: the ``.sqlite`` index file.
        max_scan_rows: the bound of rule 2.

    Raises:
        SearchBackendError: the file is missing, not an index, or of another format version.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_scan_rows: int | None = 20_000):
        self.path = Path(path)
        self.max_scan_rows = max_scan_rows
        if not self.path.is_file():
            raise SearchBackendError(f"search index {str(self.path)!r} does not exist; build it with "
                                     "`gem index build CORPUS INDEX`")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        con = self._connection()
        try:
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as e:
            self.close()
            raise SearchBackendError(f"{str(self.path)!r} is not a gem_core search index ({e}); "
                                     "build one with `gem index build CORPUS INDEX`") from None
        if meta.get("format_version") != FORMAT_VERSION:
            self.close()
            raise SearchBackendError(
                f"search index {str(self.path)!r} has format version {meta.get('format_version')!r}, "
                f"expected {FORMAT_VERSION!r}; rebuild it with `gem index build CORPUS INDEX`")
        self.meta = meta
        self.num_docs = int(meta.get("num_docs", 0))
        self._floor_df = _common_df(self.num_docs)

    def _connection(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            with self._lock:
                if self._closed:
                    raise SearchBackendError("the search index is closed")
                uri = self.path.resolve().as_uri() + "?mode=ro"
                try:
                    con = sqlite3.connect(uri, uri=True, check_same_thread=False)
                except sqlite3.Error as e:
                    raise SearchBackendError(f"cannot open search index {str(self.path)!r}: {e}") from None
                con.execute("PRAGMA mmap_size=268435456")
                self._connections.append(con)
            self._local.con = con
        return con

    def _df(self, term: str) -> int:
        row = self._connection().execute("SELECT df FROM terms WHERE term = ?", (term,)).fetchone()
        return row[0] if row else 0

    def plan(self, query: str) -> list[str]:
        """The terms of ``query`` that `search` matches, after pruning (see the class docstring)."""
        terms = query_terms(query)
        if not terms:
            return []
        con = self._connection()
        marks = ", ".join("?" * len(terms))
        df = dict(con.execute(f"SELECT term, df FROM terms WHERE term IN ({marks})", terms).fetchall())
        kept = [t for t in terms if 2 * df.get(t, 0) < self.num_docs]
        if not kept:  # only very common words (IDF ~0): the rarest stands for them all
            return [min(terms, key=lambda t: df.get(t, 0))]
        if self.max_scan_rows is not None:
            budget, chosen = 0, set()
            for t in sorted(kept, key=lambda t: df.get(t, 0)):
                cost = df.get(t, self._floor_df)
                if chosen and budget + cost > self.max_scan_rows:
                    break
                chosen.add(t)
                budget += cost
            kept = [t for t in kept if t in chosen]
        return kept

    def search(self, query: str, topk: int = 3) -> list[Passage]:
        """The ``topk`` best passages for free-text ``query`` by BM25, best first.

        The query becomes quoted terms joined by ``OR`` (`sanitize_query`), pruned as the
        class docstring says; a query without words returns ``[]``. Scores are the
        negated FTS5 ``bm25()`` with title matches weighted 2 (higher is better).

        Raises:
            SearchBackendError: the index cannot be read.
        """
        if topk < 1:
            return []
        try:
            terms = self.plan(query)
            if not terms:
                return []
            # A lone term in half the passages or more has an IDF of ~0 in bm25(): every
            # score is noise, so take the first matches instead of scoring them all.
            order = "" if len(terms) == 1 and 2 * self._df(terms[0]) >= self.num_docs else "ORDER BY rank"
            rows = self._connection().execute(
                f"SELECT doc_id, title, text, rank FROM passages WHERE passages MATCH ? {order} LIMIT ?",
                (_match_expression(terms), int(topk))).fetchall()
        except sqlite3.Error as e:
            raise SearchBackendError(f"search in {str(self.path)!r} failed: {e}") from None
        return [Passage(str(d), t, x, -float(r)) for d, t, x, r in rows]

    def close(self) -> None:
        """Close every connection. Safe to call more than once."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for con in connections:
            try:
                con.close()
            except sqlite3.Error:  # pragma: no cover - closing never matters
                pass

    def __repr__(self) -> str:
        return f"SearchIndex({str(self.path)!r}, num_docs={getattr(self, 'num_docs', '?')})"


# ----------------------------------------------------------------------------- shipped corpus


def default_corpus_path() -> Path:
    """The small encyclopedic corpus shipped with gem_core (tests and demos)."""
    return Path(__file__).resolve().parent.parent / "tools" / "data" / "search_corpus.jsonl"


_default_lock = threading.Lock()


def default_index() -> Path:
    """The index of `default_corpus_path`, built on first use and cached.

    It lives in ``$GEM_CACHE/search`` (default ``~/.cache/gem/search``), named after a
    hash of the corpus and the format version, so an updated corpus gets a fresh index.
    """
    corpus = default_corpus_path()
    digest = hashlib.sha256(corpus.read_bytes() + FORMAT_VERSION.encode()).hexdigest()[:16]
    root = os.environ.get("GEM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gem")
    target = Path(root) / "search" / f"search_corpus-{digest}.sqlite"
    with _default_lock:
        if not target.is_file():
            build_index(corpus, target)
    return target
