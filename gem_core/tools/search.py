"""The search tool: ``<search>query</search>`` answered from a local BM25 index or a retrieval server."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from gem_core.errors import InvalidArgument, check_positive_int
from gem_core.search.base import Passage, Retriever, SearchBackendError
from gem_core.tools.base import Tool, ToolCall, ToolResult
from gem_core.tools.text import innermost_first_block

__all__ = ["SearchTool", "format_passages"]

_OPEN, _CLOSE = "<search>", "</search>"

EMPTY_QUERY = ("[SearchTool Error: the search query is empty. Write what to look up between the "
               "tags, e.g. <search>capital of France</search>]")
NO_WORDS = ("[SearchTool Error: the search query has no words to search for. Use plain words, "
            "e.g. <search>capital of France</search>]")


def format_passages(passages: list[Passage]) -> str:
    """Render passages as the agent sees them: ``Doc 1(Title: ...) text`` lines in ``<information>``.

    The ``Doc i(Title: t) text`` lines are the reference GEM's and Search-R1's format;
    the ``<information>`` wrapper is the one the tool's instruction announces.
    """
    if not passages:
        return "<information>No results found.</information>"
    lines = [f"Doc {i}(Title: {p.title}) {p.text}" for i, p in enumerate(passages, 1)]
    return "<information>" + "\n".join(lines) + "</information>"


class SearchTool(Tool):
    """Search a corpus: the agent writes ``<search>query</search>`` and reads the top passages.

    Backends (pick at most one; none means the shipped demo corpus):

    - ``index``: an SQLite FTS5/BM25 index file built by ``gem index build CORPUS INDEX``
      (`gem_core.search.build_index`); embedded, no server.
    - ``search_url``: a Search-R1 style retrieval server, e.g.
      ``"http://127.0.0.1:8000/retrieve"`` (`gem_core.search.HTTPRetriever`).
    - ``backend``: any object with ``search(query, topk) -> list[Passage]`` and ``close()``.
    - none: an index of the small corpus shipped with gem_core, built on first use and
      cached in ``$GEM_CACHE/search`` (default ``~/.cache/gem/search``).

    Action format: the earliest complete ``<search>...</search>`` block; its stripped
    text is the query (`parse` never raises and runs in linear time on any string). Observation: ``<information>Doc 1(Title: t) text\\nDoc 2(...)
    ...</information>`` with up to ``topk`` passages, ``<information>No results
    found.</information>``, or ``[SearchTool Error: ...]`` with ``error=True`` (empty query,
    unreachable server, timeout, bad response). The tool never raises into the rollout.
    ``info`` holds ``query``, ``backend``, ``num_results``, ``doc_ids``, ``scores``,
    ``duration_s``. Thread-safe.

    Args:
        index: path of an index file.
        search_url: the retrieval server endpoint.
        backend: a ready search backend.
        topk: passages per query.
        timeout: seconds per HTTP attempt.
        retries: HTTP retries after a retryable failure (connection error, timeout, 5xx).
        encoding: HTTP request body, ``"json"`` or ``"msgpack"``.

    Raises:
        InvalidArgument: more than one backend, or a bad ``topk``.
        SearchBackendError: ``index`` does not exist or is not an index.

    Version history:
        v0: embedded FTS5 index and HTTP backend.
    """

    name = "search"

    def __init__(
        self,
        index: str | os.PathLike[str] | None = None,
        *,
        search_url: str | None = None,
        backend: Retriever | None = None,
        topk: int = 3,
        timeout: float = 5.0,
        retries: int = 2,
        encoding: str = "json",
    ):
        chosen = [n for n, v in (("index", index), ("search_url", search_url), ("backend", backend)) if v is not None]
        if len(chosen) > 1:
            raise InvalidArgument(f"SearchTool takes one of index, search_url, backend; got {', '.join(chosen)}")
        check_positive_int("topk", topk)
        self.topk = topk
        self._lock = threading.Lock()
        self._backend: Retriever | None = backend
        self._closed = False
        if index is not None:
            from gem_core.search.index import SearchIndex

            self._backend = SearchIndex(index)
            self.backend_name = "index"
        elif search_url is not None:
            from gem_core.search.http import HTTPRetriever

            self._backend = HTTPRetriever(search_url, timeout=timeout, retries=retries, encoding=encoding)
            self.backend_name = "http"
        else:
            self.backend_name = "custom" if backend is not None else "index"

    @property
    def backend(self) -> Retriever:
        """The search backend (the default index is built or opened on first access)."""
        backend = self._backend
        if backend is None:
            with self._lock:
                if self._closed:
                    raise SearchBackendError("the search tool is closed")
                if self._backend is None:
                    from gem_core.search.index import SearchIndex, default_index

                    self._backend = SearchIndex(default_index())
                backend = self._backend
        return backend

    def parse(self, action: str) -> ToolCall | None:
        """The earliest complete ``<search>...</search>`` call in ``action``, or ``None``."""
        if not isinstance(action, str):
            return None
        # A query never contains another opening tag, so in "<search>a <search>b</search>"
        # the complete call is "<search>b</search>". Linear: two finds and one rfind.
        block = innermost_first_block(action, _OPEN, _CLOSE)
        if block is None:
            return None
        start, body, close = block
        end = close + len(_CLOSE)
        return ToolCall(self.name, action[body:close].strip(), (start, end), action[start:end])

    def execute(self, call: ToolCall) -> ToolResult:
        """Search for ``call.payload``; every failure comes back as an error observation."""
        query = call.payload if isinstance(call.payload, str) else ""
        info: dict[str, Any] = {"query": query, "backend": self.backend_name, "num_results": 0,
                                "doc_ids": [], "scores": [], "duration_s": 0.0}
        if not query.strip():
            return ToolResult(EMPTY_QUERY, error=True, info=info)
        start = time.perf_counter()
        try:
            backend = self.backend
            if self.backend_name == "index":
                from gem_core.search.index import sanitize_query

                if sanitize_query(query) is None:
                    return ToolResult(NO_WORDS, error=True, info=info)
            passages = backend.search(query, self.topk)
        except SearchBackendError as e:
            info["duration_s"] = time.perf_counter() - start
            return ToolResult(f"[SearchTool Error: {e}]", error=True, info=info)
        except Exception as e:  # noqa: BLE001 - a custom backend must not crash the rollout
            info["duration_s"] = time.perf_counter() - start
            return ToolResult(f"[SearchTool Error: {type(e).__name__}: {e}]", error=True, info=info)
        info.update(duration_s=time.perf_counter() - start, num_results=len(passages),
                    doc_ids=[p.id for p in passages], scores=[p.score for p in passages])
        return ToolResult(format_passages(passages), info=info)

    def instruction(self) -> str:
        """How to call the tool, shown to the agent."""
        return (
            "You can look things up with a search engine.\n"
            "- To search, write a query between search tags: <search>your query</search>\n"
            f"- The top {self.topk} passages come back between <information> and </information>.\n"
            "- Search as often as you need, one query per turn, then give your final answer."
        )

    def close(self) -> None:
        """Close the backend's connections. Safe to call more than once."""
        with self._lock:
            self._closed = True
            backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()

    def __repr__(self) -> str:
        return f"SearchTool(backend={self.backend_name!r}, topk={self.topk})"
