"""Tests for gem_core.search.index: building the FTS5 index (and `gem index build`), corpus formats, query planning and sanitising."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gem_core.cli import main
from gem_core.errors import InvalidArgument
from gem_core.search import (
    SearchBackendError,
    SearchIndex,
    build_index,
    default_corpus_path,
    iter_corpus,
    sanitize_query,
)
from gem_core.tools import SearchTool
from tests.tools.test_search import search


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


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


def test_sanitize_query_rules() -> None:
    assert sanitize_query("") is None and sanitize_query("  ?! ") is None
    assert sanitize_query("What is the capital of France?") == '"capital" OR "france"'
    assert sanitize_query("the of") == '"the" OR "of"'  # only stopwords: kept
    assert sanitize_query('NEAR OR near NOT "x"') == '"near" OR "not" OR "x"'
    many = " ".join(f"w{i}" for i in range(100))
    assert sanitize_query(many).count(" OR ") == 31
    assert sanitize_query(None) is None  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- CLI


def test_cli_index_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "sub" / "idx.sqlite"
    assert main(["index", "build", str(default_corpus_path()), str(target), "--batch-size", "50"]) == 0
    assert "indexed 169 passages into" in capsys.readouterr().out
    with SearchTool(target) as t:
        assert search(t, "Great Wall Ming").observation.startswith("<information>Doc 1(Title: Great Wall of China)")
    assert main(["index", "build", str(default_corpus_path()), str(target), "--no-overwrite"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["index", "build", str(tmp_path / "missing.jsonl"), str(target)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["index", "build", str(default_corpus_path()), str(target), "--batch-size", "0"]) == 2
    assert "batch_size must be >= 1" in capsys.readouterr().err
    assert main(["index"]) == 2
