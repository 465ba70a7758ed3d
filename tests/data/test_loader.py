"""gem_core.data: resolution order, formats, per-process sharing and the offline error."""

from __future__ import annotations

import json

import pytest

from gem_core import data
from gem_core.data import DatasetUnavailable, load_rows, read_local


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    data.clear_cache()
    monkeypatch.delenv("GEM_DATA_DIR", raising=False)
    monkeypatch.delenv("GEM_DATA", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_explicit_jsonl_path_is_loaded_once_and_shared(tmp_path) -> None:
    f = tmp_path / "d.jsonl"
    _write_jsonl(f, [{"problem": "1+1", "answer": "2"}])
    a = load_rows("math:X", "org/x", data_path=f)
    b = load_rows("math:X", "org/x", data_path=str(f))
    assert a == [{"problem": "1+1", "answer": "2"}]
    assert a is b  # one list per process, shared by every env


def test_parquet_and_split_directory(tmp_path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is needed for Parquet")
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist([{"q": "a", "a": "b"}]), tmp_path / "test.parquet")
    assert read_local(tmp_path, "test") == [{"q": "a", "a": "b"}]
    assert load_rows("qa:X", "org/y", "test", data_path=tmp_path / "test.parquet")[0]["a"] == "b"


def test_datasets_save_to_disk_directory(tmp_path) -> None:
    datasets = pytest.importorskip("datasets", reason="the datasets package reads save_to_disk dirs")
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list([{"problem": "p", "answer": "1"}])})
    dd.save_to_disk(str(tmp_path / "dd"))
    assert load_rows("math:X", "org/z", "train", data_path=tmp_path / "dd") == [{"problem": "p", "answer": "1"}]
    with pytest.raises(FileNotFoundError, match="splits"):
        read_local(tmp_path / "dd", "test")


def test_gem_data_dir_is_used(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "org__name"
    d.mkdir()
    _write_jsonl(d / "train.jsonl", [{"x": 1}])
    monkeypatch.setenv("GEM_DATA_DIR", str(tmp_path))
    assert load_rows("t:X", "org/name") == [{"x": 1}]


def test_offline_error_names_env_dataset_and_fixes() -> None:
    with pytest.raises(DatasetUnavailable) as e:
        load_rows("math:GSM8K", "axon-rl/GSM-8k")
    msg = str(e.value)
    for part in ("math:GSM8K", "axon-rl/GSM-8k", "data_path=", "GEM_DATA_DIR", "sample"):
        assert part in msg


def test_missing_sample_and_missing_column_are_clear_errors(tmp_path) -> None:
    with pytest.raises(DatasetUnavailable, match="ships no sample"):
        load_rows("x:Y", "nobody/nothing", data_path="sample")
    f = tmp_path / "d.jsonl"
    _write_jsonl(f, [{"problem": "p"}])
    with pytest.raises(ValueError, match=r"lack the column\(s\) \['answer'\]"):
        load_rows("math:X", "org/x", data_path=f, required_keys=["problem", "answer"])


def test_bad_json_line_names_file_and_line(tmp_path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        load_rows("x:Y", "org/x", data_path=f)
