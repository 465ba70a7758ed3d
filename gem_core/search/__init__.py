"""Search backends for `gem_core.tools.SearchTool`: an embedded SQLite FTS5/BM25 index and an HTTP client.

- `build_index` / `SearchIndex`: one ``.sqlite`` file built from a JSON-lines corpus
  (``gem index build CORPUS INDEX``), searched read-only with BM25; no server.
- `HTTPRetriever`: a client of Search-R1 style retrieval servers (``POST /retrieve``),
  for corpora that outgrow one machine.

Only the standard library is needed (msgpack optionally).
"""

from __future__ import annotations

from gem_core import _lazy

# Public name -> the module that defines it; each loads on first access.
__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "Passage": "gem_core.search.base",
        "Retriever": "gem_core.search.base",
        "SearchBackendError": "gem_core.search.base",
        "split_contents": "gem_core.search.base",
        "HTTPRetriever": "gem_core.search.http",
        "IndexStats": "gem_core.search.index",
        "SearchIndex": "gem_core.search.index",
        "build_index": "gem_core.search.index",
        "default_corpus_path": "gem_core.search.index",
        "default_index": "gem_core.search.index",
        "iter_corpus": "gem_core.search.index",
        "query_terms": "gem_core.search.index",
        "sanitize_query": "gem_core.search.index",
    },
)
