"""Reference ``gem.tools.search_engine.serp_search_server``: not ported (retrieval and web-search servers (Faiss/pyserini indexes, Google and SerpAPI keys)).

Every public name imports; using one raises `NotPorted`, naming gem_core.search (a local BM25 index, `gem search serve`) or gem_core.search.http.HTTPRetriever for a running server.
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders

_WHY = 'retrieval and web-search servers (Faiss/pyserini indexes, Google and SerpAPI keys)'
_INSTEAD = 'gem_core.search (a local BM25 index, `gem search serve`) or gem_core.search.http.HTTPRetriever for a running server'

__all__ = ['Config', 'OnlineSearchEngine', 'SearchRequest', 'SearchResponse', 'SearchWorker']

(Config, OnlineSearchEngine, SearchRequest, SearchResponse, SearchWorker) = placeholders(
    __name__, ('Config', 'OnlineSearchEngine', 'SearchRequest', 'SearchResponse', 'SearchWorker'), instead=_INSTEAD, why=_WHY
)
