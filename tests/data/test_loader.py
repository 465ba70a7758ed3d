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


def test_bom_and_crlf_jsonl_files_read_like_plain_ones(tmp_path) -> None:
    # Saved by a Windows editor: a byte-order mark and CRLF line endings.
    f = tmp_path / "win.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"problem": "1+1", "answer": "2"}\r\n\r\n{"problem": "2+2", "answer": "4"}\r\n')
    rows = load_rows("math:X", "org/win", data_path=f, required_keys=["problem", "answer"])
    assert rows == [{"problem": "1+1", "answer": "2"}, {"problem": "2+2", "answer": "4"}]


def test_a_line_that_is_not_an_object_names_file_and_line(tmp_path) -> None:
    f = tmp_path / "list.jsonl"
    f.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"list.jsonl:2: expected one JSON object \(a row\) per line, got a list"):
        read_local(f)


def test_a_directory_never_serves_another_split_in_place_of_the_asked_one(tmp_path) -> None:
    _write_jsonl(tmp_path / "train.jsonl", [{"x": "train row"}])
    with pytest.raises(FileNotFoundError, match=r"holds no test.jsonl, test.parquet .*found: "
                       r"\['train.jsonl'\]\); name the test split's file test.jsonl, or pass the file"):
        load_rows("eval:X", "org/split", "test", data_path=tmp_path)
    assert read_local(tmp_path, "train") == [{"x": "train row"}]
    assert read_local(tmp_path) == [{"x": "train row"}]  # no split asked: the first found


def test_threads_loading_one_dataset_at_once_load_it_once(tmp_path, monkeypatch) -> None:
    import threading
    import time

    f = tmp_path / "d.jsonl"
    _write_jsonl(f, [{"x": 1}])
    reads = []
    real = data._read_jsonl

    def slow_read(path):
        reads.append(path)
        time.sleep(0.1)  # long enough for every thread to ask before the first read ends
        return real(path)

    monkeypatch.setattr(data, "_read_jsonl", slow_read)
    start = threading.Barrier(6)
    got = []

    def load():
        start.wait()
        got.append(load_rows("math:X", "org/x", data_path=f))

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 6 and all(rows is got[0] for rows in got)
    assert len(reads) == 1


def test_home_relative_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _write_jsonl(tmp_path / "d.jsonl", [{"x": 1}])
    assert load_rows("t:X", "org/home", data_path="~/d.jsonl") == [{"x": 1}]
    (tmp_path / "store" / "org__home").mkdir(parents=True)
    _write_jsonl(tmp_path / "store" / "org__home" / "train.jsonl", [{"x": 2}])
    monkeypatch.setenv("GEM_DATA_DIR", "~/store")
    assert load_rows("t:X", "org/home") == [{"x": 2}]


def test_parquet_with_nested_columns(tmp_path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is needed for Parquet")
    import pyarrow as pa

    rows = [{"problem": "p", "tests": {"inputs": ["1", "2"], "outputs": ["2", "3"]}, "tags": ["a"]},
            {"problem": "q", "tests": {"inputs": [], "outputs": []}, "tags": []}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    assert load_rows("code:X", "org/nested", data_path=tmp_path) == rows


def test_datasets_dict_without_the_split_names_the_splits(tmp_path) -> None:
    datasets = pytest.importorskip("datasets", reason="the datasets package reads save_to_disk dirs")
    datasets.DatasetDict({"train": datasets.Dataset.from_list([{"x": 1}])}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(FileNotFoundError, match=r"has splits \['train'\], not 'test'"):
        load_rows("eval:X", "org/dd", "test", data_path=tmp_path / "dd")
