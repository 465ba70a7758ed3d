"""Search backends for `gem_core.tools.SearchTool`: an embedded SQLite FTS5/BM25 index and an HTTP client.

- `build_index` / `SearchIndex`: one ``.sqlite`` file built from a JSON-lines corpus
  (``gem index build CORPUS INDEX``), searched read-only with BM25; no server.
- `HTTPRetriever`: a client of Search-R1 style retrieval servers (``POST /retrieve``),
  for corpora that outgrow one machine.

Only the standard library is needed (msgpack optionally).
"""

from __future__ import annotations

from gem_core.search.base import Passage, Retriever, SearchBackendError, split_contents
from gem_core.search.http import HTTPRetriever
from gem_core.search.index import (
    IndexStats,
    SearchIndex,
    build_index,
    default_corpus_path,
    default_index,
    iter_corpus,
    query_terms,
    sanitize_query,
)

__all__ = [
    "Passage",
    "Retriever",
    "SearchBackendError",
    "split_contents",
    "HTTPRetriever",
    "IndexStats",
    "SearchIndex",
    "build_index",
    "default_corpus_path",
    "default_index",
    "iter_corpus",
    "query_terms",
    "sanitize_query",
]
