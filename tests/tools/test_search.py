"""Tests for the search tool: FTS5 index build and ranking, query sanitising, parsing, HTTP backend, CLI."""

from __future__ import annotations

import gzip
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gem_core.cli import main
from gem_core.errors import InvalidArgument
from gem_core.search import (
    HTTPRetriever,
    Passage,
    SearchBackendError,
    SearchIndex,
    build_index,
    default_corpus_path,
    iter_corpus,
    sanitize_query,
)
from gem_core.tools import SearchTool, ToolCall
from gem_core.tools.search import format_passages


@pytest.fixture(scope="module")
def shipped_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("index") / "corpus.sqlite"
    build_index(default_corpus_path(), path)
    return path


@pytest.fixture
def tool(shipped_index: Path) -> Iterator[SearchTool]:
    with SearchTool(shipped_index) as t:
        yield t


def _search(tool: SearchTool, query: str):
    call = tool.parse(f"<think>let me look it up</think><search>{query}</search>")
    assert call is not None
    return tool.execute(call)


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- index and ranking


@pytest.mark.parametrize(
    "query, title",
    [
        ("What is the capital of France?", "Paris"),
        ("capital of Japan", "Tokyo"),
        ("who invented the telephone", "Telephone"),
        ("deepest lake in the world", "Lake Baikal"),
        ("first human in space", "Yuri Gagarin"),
        ("who painted The Starry Night", "Vincent van Gogh"),
        ("double helix structure of DNA", "DNA"),
        ("largest animal krill", "Blue whale"),
        ("Rosetta Stone decipher", "Hieroglyphs"),
        ("PYTHON programming language Guido", "Python programming language"),
    ],
)
def test_known_queries_rank_the_right_passage_first(tool: SearchTool, query: str, title: str) -> None:
    result = _search(tool, query)
    assert not result.error
    assert result.observation.startswith(f"<information>Doc 1(Title: {title}) ")
    assert 1 <= result.info["num_results"] == len(result.info["doc_ids"]) <= 3
    scores = result.info["scores"]
    assert scores == sorted(scores, reverse=True)


def test_observation_format_follows_the_reference() -> None:
    passages = [Passage("1", "Alpha", "first text"), Passage("2", "Beta", "second text")]
    assert format_passages(passages) == (
        "<information>Doc 1(Title: Alpha) first text\nDoc 2(Title: Beta) second text</information>")
    assert format_passages([]) == "<information>No results found.</information>"


def test_topk_and_no_match(shipped_index: Path) -> None:
    with SearchTool(shipped_index, topk=5) as t:
        assert _search(t, "river").info["num_results"] == 5
        nothing = _search(t, "xylophonezzz qwertyuiop")
        assert not nothing.error and nothing.observation == "<information>No results found.</information>"
    with pytest.raises(InvalidArgument, match="topk must be a positive int"):
        SearchTool(shipped_index, topk=0)


def test_index_meta_and_batches(tmp_path: Path) -> None:
    stats = build_index(default_corpus_path(), tmp_path / "a.sqlite", batch_size=7)
    count = sum(1 for _ in iter_corpus(default_corpus_path()))
    assert stats.num_docs == count > 100 and stats.size_bytes > 0
    with SearchIndex(stats.path) as index:
        assert index.num_docs == count and index.meta["format_version"] == "1"
        assert index.search("Eiffel Tower", 1)[0].title == "Eiffel Tower"
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed into place


def test_contents_format_gzip_and_unicode(tmp_path: Path) -> None:
    corpus = tmp_path / "r1.jsonl.gz"
    rows = [
        {"id": 7, "contents": '"Zürich"\nZürich is the largest city in Switzerland, on Lake Zurich.'},
        {"id": "b", "contents": "Café\nA café serves coffee and light meals."},
        {"id": "c", "contents": "東京\n東京は日本の首都です。"},
    ]
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    build_index(corpus, tmp_path / "r1.sqlite")
    with SearchIndex(tmp_path / "r1.sqlite") as index:
        top = index.search("zurich", 1)[0]  # diacritics folded
        assert (top.id, top.title) == ("7", "Zürich") and top.text.startswith("Zürich is")
        assert index.search("CAFE", 3)[0].id == "b"
        assert index.search("東京は日本の首都です", 3)[0].id == "c"


def test_malformed_corpus_lines_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "ok"}\n\n{not json}\n', encoding="utf-8")
    with pytest.raises(InvalidArgument, match=r"bad\.jsonl:3: not valid JSON"):
        build_index(bad, tmp_path / "bad.sqlite")
    assert not (tmp_path / "bad.sqlite").exists() and not list(tmp_path.glob(".*.tmp"))
    _write_jsonl(bad, [{"id": 1, "body": "x"}])
    with pytest.raises(InvalidArgument, match=r"bad\.jsonl:1: expected the keys 'id', 'title', 'text'"):
        build_index(bad, tmp_path / "bad.sqlite")
    _write_jsonl(bad, [["a list"]])
    with pytest.raises(InvalidArgument, match="expected a JSON object"):
        build_index(bad, tmp_path / "bad.sqlite")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        build_index(tmp_path / "missing.jsonl", tmp_path / "x.sqlite")
    with pytest.raises(InvalidArgument, match="batch_size must be >= 1"):
        build_index(bad, tmp_path / "x.sqlite", batch_size=0)


def test_no_overwrite_and_bad_index_files(tmp_path: Path) -> None:
    good = _write_jsonl(tmp_path / "c.jsonl", [{"id": "1", "title": "T", "text": "some text"}])
    build_index(good, tmp_path / "i.sqlite")
    with pytest.raises(InvalidArgument, match="already exists"):
        build_index(good, tmp_path / "i.sqlite", overwrite=False)
    with pytest.raises(SearchBackendError, match="does not exist; build it with `gem index build"):
        SearchTool(tmp_path / "nope.sqlite")
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(SearchBackendError, match="not a gem_core search index"):
        SearchIndex(tmp_path / "junk.sqlite")
    con = sqlite3.connect(tmp_path / "i.sqlite")
    con.execute("UPDATE meta SET value = '0' WHERE key = 'format_version'")
    con.commit()
    con.close()
    with pytest.raises(SearchBackendError, match="format version '0', expected '1'"):
        SearchIndex(tmp_path / "i.sqlite")


def test_iterable_corpus(tmp_path: Path) -> None:
    rows = ((str(i), f"title {i}", f"word{i} common") for i in range(50))
    stats = build_index(rows, tmp_path / "it.sqlite", batch_size=16)
    assert stats.num_docs == 50
    with SearchIndex(stats.path) as index:
        assert index.search("word17", 3)[0].id == "17"


def test_query_pruning_drops_very_common_terms(tmp_path: Path) -> None:
    # "filler" is in every passage (FTS5 gives it an IDF of ~0); "mid" in 40 of 100.
    rows = [(str(i), "", f"filler {'mid ' if i < 40 else ''}w{i}") for i in range(100)]
    build_index(iter(rows), tmp_path / "p.sqlite")
    with SearchIndex(tmp_path / "p.sqlite") as exact, \
            SearchIndex(tmp_path / "p.sqlite", max_scan_rows=10) as tight:
        assert exact.plan("filler w5 mid") == ["w5", "mid"]  # rule 1: exact
        assert exact.search("filler w5", 1)[0].id == "5"
        assert exact.plan("filler") == ["filler"]  # nothing else: the rarest is kept
        assert len(exact.search("filler", 3)) == 3
        assert tight.plan("filler w5 mid") == ["w5"]  # rule 2: "mid" (40 rows) over the budget
        assert tight.plan("mid") == ["mid"]  # the rarest term always stays
        assert tight.search("w7 mid", 2)[0].id == "7"
        assert exact.plan("") == [] and exact.search("?!", 3) == []


# ----------------------------------------------------------------------------- sanitising


HOSTILE = [
    '"', '""', '"unbalanced quote', "(", ")", "((capital)", "capital AND", "AND OR NOT NEAR",
    "NEAR(capital france, 2)", "capital NOT", "*", "capi*", "^capital", "title:Paris", "{title text}: x",
    "-capital +france", "a:b:c", "'; DROP TABLE passages; --", "\x00\x01\x02", "\\", "capital\nof\tFrance",
    "émigré naïve Zürich", "🙂🚀", "日本の首都", "Ωμέγα", "x" * 5000, ("capital of France " * 600)[:10_240],
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_reach_fts5_as_syntax(tool: SearchTool, query: str) -> None:
    expr = sanitize_query(query)
    if expr is not None:
        for term in expr.split(" OR "):
            assert term.startswith('"') and term.endswith('"')
    start = time.perf_counter()
    result = tool.execute(ToolCall("search", query))
    assert time.perf_counter() - start < 1.0
    if expr is None:
        assert result.error and "no words to search for" in result.observation
    else:
        assert not result.error, result.observation
        assert result.observation.startswith("<information>")


def test_sanitize_query_rules() -> None:
    assert sanitize_query("") is None and sanitize_query("  ?! ") is None
    assert sanitize_query("What is the capital of France?") == '"capital" OR "france"'
    assert sanitize_query("the of") == '"the" OR "of"'  # only stopwords: kept
    assert sanitize_query('NEAR OR near NOT "x"') == '"near" OR "not" OR "x"'
    many = " ".join(f"w{i}" for i in range(100))
    assert sanitize_query(many).count(" OR ") == 31
    assert sanitize_query(None) is None  # type: ignore[arg-type]


def test_empty_query_observation(tool: SearchTool) -> None:
    for action in ("<search></search>", "<search>   \n </search>"):
        call = tool.parse(action)
        assert call is not None and call.payload == ""
        result = tool.execute(call)
        assert result.error and "search query is empty" in result.observation


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "action, query",
    [
        ("<search>capital of France</search>", "capital of France"),
        ("<think>hmm</think>\n<search>\n  multi\nline \n</search> trailing", "multi\nline"),
        ("<search>first</search> then <search>second</search>", "first"),
        ("<search>unclosed ... <search>closed</search>", "closed"),
        ("```<search>inside code fence</search>```", "inside code fence"),
        ("text </search> <search>after stray close</search>", "after stray close"),
    ],
)
def test_parse_takes_earliest_complete_block(action: str, query: str) -> None:
    call = SearchTool(backend=_FakeBackend()).parse(action)
    assert call is not None and call.tool == "search" and call.payload == query
    start, end = call.span
    assert action[start:end] == call.raw and call.raw.startswith("<search>") and call.raw.endswith("</search>")


@pytest.mark.parametrize(
    "action",
    ["no tool here", "<search>never closed", "</search>", "<SEARCH>upper</SEARCH>", "<search >x</search>",
     "", None, 42],
)
def test_parse_returns_none_without_a_complete_call(action: Any) -> None:
    assert SearchTool(backend=_FakeBackend()).parse(action) is None


class _FakeBackend:
    def __init__(self, error: Exception | None = None):
        self.error = error
        self.closed = 0

    def search(self, query: str, topk: int) -> list[Passage]:
        if self.error:
            raise self.error
        return [Passage(str(i), f"T{i}", f"{query} {i}", 1.0 / (i + 1)) for i in range(topk)]

    def close(self) -> None:
        self.closed += 1


def test_custom_backend_errors_become_observations() -> None:
    backend = _FakeBackend(RuntimeError("boom"))
    with SearchTool(backend=backend, topk=2) as t:
        result = t.execute(t.parse("<search>x</search>"))
        assert result.error and result.observation == "[SearchTool Error: RuntimeError: boom]"
        assert t.backend_name == "custom"
    assert backend.closed == 1
    result = t.execute(ToolCall("search", "x"))  # closed: still an observation
    assert result.error and "closed" in result.observation
    t.close()  # twice is fine


def test_constructor_rejects_two_backends(shipped_index: Path) -> None:
    with pytest.raises(InvalidArgument, match="one of index, search_url, backend; got index, search_url"):
        SearchTool(shipped_index, search_url="http://127.0.0.1:1/retrieve")
    with pytest.raises(InvalidArgument, match="http:// or https:// URL"):
        SearchTool(search_url="127.0.0.1:8000")
    assert "<search>" in SearchTool(backend=_FakeBackend()).instruction()


def test_default_tool_builds_and_reuses_cached_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEM_CACHE", str(tmp_path))
    with SearchTool() as t:
        assert not list(tmp_path.glob("search/*.sqlite"))  # built on first use, not before
        assert _search(t, "capital of Canada").observation.startswith("<information>Doc 1(Title: Ottawa)")
    [cached] = tmp_path.glob("search/*.sqlite")
    mtime = cached.stat().st_mtime_ns
    with SearchTool() as t:
        assert not _search(t, "Mount Everest").error
    assert cached.stat().st_mtime_ns == mtime


def test_concurrent_queries_from_threads(tool: SearchTool) -> None:
    queries = {"capital of France": "Paris", "deepest lake": "Lake Baikal", "chess board": "Chess",
               "speed of light vacuum": "Speed of light"}
    failures: list[str] = []

    def worker() -> None:
        for _ in range(25):
            for q, title in queries.items():
                obs = _search(tool, q).observation
                if not obs.startswith(f"<information>Doc 1(Title: {title})"):
                    failures.append(obs[:80])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert not failures


# ----------------------------------------------------------------------------- HTTP backend


DOCS = [{"id": "d1", "contents": '"Paris"\nParis is the capital of France.'},
        {"id": "d2", "contents": "Lyon\nLyon is a city in France."},
        {"id": "d3", "contents": "Nice\nNice is on the Riviera."}]


class _Server:
    """A retrieval server on 127.0.0.1 whose answers follow a script of behaviours."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.default = "ok"
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append({"path": self.path, "ctype": self.headers.get("Content-Type"),
                                        "body": json.loads(body) if body[:1] == b"{" else body})
                mode = server.script.pop(0) if server.script else server.default
                if mode == "hang":
                    server.release.wait(10)
                    return
                if mode in ("500", "404"):
                    self._reply(int(mode), b"server trouble", "text/plain")
                elif mode == "badjson":
                    self._reply(200, b"{not json", "application/json")
                elif mode == "badshape":
                    self._reply(200, b'{"results": []}', "application/json")
                else:
                    req = server.requests[-1]["body"]
                    hits = [{"document": d, "score": 10.0 - i} for i, d in enumerate(DOCS[: req["topk"]])]
                    result = [hits for _ in req["queries"]] if mode == "ok" else hits  # "flat": reference GEM
                    self._reply(200, json.dumps({"result": result}).encode(), "application/json")

            def _reply(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/retrieve"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


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
    result = _search(tool, "capital of France")
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
    assert _search(_http_tool(server), "x").info["doc_ids"] == ["d1", "d2"]


def test_http_retries_a_500_then_succeeds(server: _Server) -> None:
    server.script = ["500"]
    tool = _http_tool(server, retries=2)
    result = _search(tool, "capital")
    assert not result.error and len(server.requests) == 2
    assert tool.backend.stats == {"requests": 1, "retries": 1, "failures": 0}  # type: ignore[attr-defined]


def test_http_persistent_500_is_an_error_observation(server: _Server) -> None:
    server.default = "500"
    result = _search(_http_tool(server, retries=2), "capital")
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
    result = _search(_http_tool(server, retries=2), "capital")
    assert result.error and message in result.observation
    assert len(server.requests) == 1


def test_http_hung_request_times_out_within_the_bound(server: _Server) -> None:
    server.default = "hang"
    tool = _http_tool(server, timeout=0.3, retries=1)
    start = time.perf_counter()
    result = _search(tool, "capital")
    elapsed = time.perf_counter() - start
    assert result.error and "no answer within 0.3 s" in result.observation
    assert "failed after 2 attempt(s)" in result.observation
    assert elapsed < tool.backend.total_timeout + 0.5 < 1.5  # type: ignore[attr-defined]


def test_http_unreachable_server_is_an_error_observation() -> None:
    s = _Server()
    url = s.url
    s.close()
    result = _search(SearchTool(search_url=url, timeout=0.5, retries=1), "x")
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


# ----------------------------------------------------------------------------- CLI


def test_cli_index_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "sub" / "idx.sqlite"
    assert main(["index", "build", str(default_corpus_path()), str(target), "--batch-size", "50"]) == 0
    assert "indexed 169 passages into" in capsys.readouterr().out
    with SearchTool(target) as t:
        assert _search(t, "Great Wall Ming").observation.startswith("<information>Doc 1(Title: Great Wall of China)")
    assert main(["index", "build", str(default_corpus_path()), str(target), "--no-overwrite"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["index", "build", str(tmp_path / "missing.jsonl"), str(target)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["index", "build", str(default_corpus_path()), str(target), "--batch-size", "0"]) == 2
    assert "batch_size must be >= 1" in capsys.readouterr().err
    assert main(["index"]) == 2
