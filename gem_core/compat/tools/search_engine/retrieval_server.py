"""Reference ``gem.tools.search_engine.retrieval_server``: not ported (retrieval and web-search servers (Faiss/pyserini indexes, Google and SerpAPI keys)).

Every public name imports; using one raises `NotPorted`, naming gem_core.search (a local BM25 index, `gem search serve`) or gem_core.search.http.HTTPRetriever for a running server.
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders

_WHY = 'retrieval and web-search servers (Faiss/pyserini indexes, Google and SerpAPI keys)'
_INSTEAD = 'gem_core.search (a local BM25 index, `gem search serve`) or gem_core.search.http.HTTPRetriever for a running server'

__all__ = ['BM25Retriever', 'BaseRetriever', 'Config', 'DenseRetriever', 'Encoder', 'QueryRequest', 'RetrievalResponse', 'RetrievalWorker', 'get_retriever', 'load_corpus', 'load_docs', 'load_model', 'pooling', 'read_jsonl']

(BM25Retriever, BaseRetriever, Config, DenseRetriever, Encoder, QueryRequest, RetrievalResponse, RetrievalWorker, get_retriever, load_corpus, load_docs, load_model, pooling, read_jsonl) = placeholders(
    __name__, ('BM25Retriever', 'BaseRetriever', 'Config', 'DenseRetriever', 'Encoder', 'QueryRequest', 'RetrievalResponse', 'RetrievalWorker', 'get_retriever', 'load_corpus', 'load_docs', 'load_model', 'pooling', 'read_jsonl'), instead=_INSTEAD, why=_WHY
)
