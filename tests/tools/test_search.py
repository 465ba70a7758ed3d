"""Tests for the search tool (gem_core.tools.search): ranking, query sanitising and parsing, backends, the cached default index.

The backends themselves are tested in tests/search/ (the FTS5 index, the HTTP client)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gem_core.errors import InvalidArgument
from gem_core.search import Passage, build_index, default_corpus_path, sanitize_query
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


def search(tool: SearchTool, query: str):
    call = tool.parse(f"<think>let me look it up</think><search>{query}</search>")
    assert call is not None
    return tool.execute(call)


# ----------------------------------------------------------------------------- ranking


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
    result = search(tool, query)
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
        assert search(t, "river").info["num_results"] == 5
        nothing = search(t, "xylophonezzz qwertyuiop")
        assert not nothing.error and nothing.observation == "<information>No results found.</information>"
    with pytest.raises(InvalidArgument, match="topk must be a positive int"):
        SearchTool(shipped_index, topk=0)


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
        assert search(t, "capital of Canada").observation.startswith("<information>Doc 1(Title: Ottawa)")
    [cached] = tmp_path.glob("search/*.sqlite")
    mtime = cached.stat().st_mtime_ns
    with SearchTool() as t:
        assert not search(t, "Mount Everest").error
    assert cached.stat().st_mtime_ns == mtime


def test_concurrent_queries_from_threads(tool: SearchTool) -> None:
    queries = {"capital of France": "Paris", "deepest lake": "Lake Baikal", "chess board": "Chess",
               "speed of light vacuum": "Speed of light"}
    failures: list[str] = []

    def worker() -> None:
        for _ in range(25):
            for q, title in queries.items():
                obs = search(tool, q).observation
                if not obs.startswith(f"<information>Doc 1(Title: {title})"):
                    failures.append(obs[:80])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert not failures
