"""Tests for gem_core.search.http: the Search-R1 style retrieval client (protocol, retries, errors, msgpack), through the search tool."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gem_core.search import HTTPRetriever, Passage, SearchBackendError
from gem_core.testing.http_server import Request, ScriptedHTTPServer
from gem_core.tools import SearchTool
from tests.tools.test_search import search

DOCS = [{"id": "d1", "contents": '"Paris"\nParis is the capital of France.'},
        {"id": "d2", "contents": "Lyon\nLyon is a city in France."},
        {"id": "d3", "contents": "Nice\nNice is on the Riviera."}]


class _Server(ScriptedHTTPServer):
    """A retrieval server on 127.0.0.1 whose answers follow a script of behaviours."""

    def __init__(self) -> None:
        super().__init__()
        self.url = self.address + "/retrieve"

    def handle_post(self, request: Request) -> None:
        body = request.read_body()
        self.requests.append({"path": request.path, "ctype": request.headers.get("Content-Type"),
                              "body": json.loads(body) if body[:1] == b"{" else body})
        mode = self.next_mode()
        if mode == "hang":
            return self.hang(10)
        if mode in ("500", "404"):
            request.reply(int(mode), b"server trouble", "text/plain")
        elif mode == "badjson":
            request.reply(200, b"{not json")
        elif mode == "badshape":
            request.reply(200, b'{"results": []}')
        else:
            req = self.requests[-1]["body"]
            hits = [{"document": d, "score": 10.0 - i} for i, d in enumerate(DOCS[: req["topk"]])]
            result = [hits for _ in req["queries"]] if mode == "ok" else hits  # "flat": reference GEM
            request.reply(200, json.dumps({"result": result}).encode())


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


def _http_tool(server: _Server, **kwargs: Any) -> SearchTool:
    kwargs.setdefault("timeout", 2.0)
    tool = SearchTool(search_url=server.url, topk=2, **kwargs)
    tool.backend.backoff = 0.01  # type: ignore[attr-defined]
    return tool


def test_http_success_speaks_the_retrieval_protocol(server: _Server) -> None:
    tool = _http_tool(server)
    result = search(tool, "capital of France")
    assert not result.error
    assert result.observation == ("<information>Doc 1(Title: Paris) Paris is the capital of France.\n"
                                  "Doc 2(Title: Lyon) Lyon is a city in France.</information>")
    assert result.info["doc_ids"] == ["d1", "d2"] and result.info["scores"] == [10.0, 9.0]
    assert result.info["backend"] == "http"
    [req] = server.requests
    assert req["path"] == "/retrieve" and req["ctype"] == "application/json"
    assert req["body"] == {"queries": ["capital of France"], "query": "capital of France", "topk": 2,
                           "return_scores": True}


def test_http_accepts_the_reference_single_query_shape(server: _Server) -> None:
    server.default = "flat"
    assert search(_http_tool(server), "x").info["doc_ids"] == ["d1", "d2"]


def test_http_retries_a_500_then_succeeds(server: _Server) -> None:
    server.script = ["500"]
    tool = _http_tool(server, retries=2)
    result = search(tool, "capital")
    assert not result.error and len(server.requests) == 2
    assert tool.backend.stats == {"requests": 1, "retries": 1, "failures": 0}  # type: ignore[attr-defined]


def test_http_persistent_500_is_an_error_observation(server: _Server) -> None:
    server.default = "500"
    result = search(_http_tool(server, retries=2), "capital")
    assert result.error and result.observation.startswith("[SearchTool Error: ")
    assert "failed after 3 attempt(s)" in result.observation and "HTTP 500" in result.observation
    assert "server trouble" in result.observation and len(server.requests) == 3


@pytest.mark.parametrize("mode, message", [
    ("badjson", "sent invalid JSON"),
    ("badshape", "expected {'result': [...]}, got keys ['results']"),
    ("404", "answered HTTP 404"),
])
def test_http_bad_answers_are_not_retried(server: _Server, mode: str, message: str) -> None:
    server.default = mode
    result = search(_http_tool(server, retries=2), "capital")
    assert result.error and message in result.observation
    assert len(server.requests) == 1


def test_http_hung_request_times_out_within_the_bound(server: _Server) -> None:
    server.default = "hang"
    tool = _http_tool(server, timeout=0.3, retries=1)
    start = time.perf_counter()
    result = search(tool, "capital")
    elapsed = time.perf_counter() - start
    assert result.error and "no answer within 0.3 s" in result.observation
    assert "failed after 2 attempt(s)" in result.observation
    assert elapsed < tool.backend.total_timeout + 0.5 < 1.5  # type: ignore[attr-defined]


def test_http_unreachable_server_is_an_error_observation() -> None:
    s = _Server()
    url = s.url
    s.close()
    result = search(SearchTool(search_url=url, timeout=0.5, retries=1), "x")
    assert result.error and "cannot reach it" in result.observation


def test_http_msgpack_round_trip(server: _Server) -> None:
    pytest.importorskip("msgpack", reason="msgpack not installed: the msgpack encoding is optional")
    import msgpack

    retriever = HTTPRetriever(server.url, encoding="msgpack")
    data, ctype = retriever._encode({"query": "x", "topk": 1})
    assert ctype == "application/msgpack" and msgpack.unpackb(data) == {"query": "x", "topk": 1}
    body = msgpack.packb({"result": [{"document": DOCS[0], "score": 1.5}]})
    assert HTTPRetriever.parse_response(retriever._decode(body, "application/msgpack"))[0].title == "Paris"


def test_parse_response_shapes() -> None:
    bare = HTTPRetriever.parse_response({"result": [[{"id": 1, "title": "A", "text": "a"}]]})
    assert bare == [Passage("1", "A", "a", None)]
    with pytest.raises(SearchBackendError, match="no 'contents'"):
        HTTPRetriever.parse_response({"result": [{"document": {"x": 1}}]})
    with pytest.raises(SearchBackendError, match="expected an object with 'document' and 'score'"):
        HTTPRetriever.parse_response({"result": ["str"]})
    assert HTTPRetriever.parse_response({"result": []}) == []
