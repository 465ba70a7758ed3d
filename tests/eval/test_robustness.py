"""`gem eval` under abuse: killed writes, odd text, resumes that change the run, bad --out, failing envs.

Every test here runs a scripted chat policy (no model, no server), so it needs neither
torch nor a tokenizer.
"""

from __future__ import annotations

import json

import pytest

from gem_core.cli import main
from gem_core.core import Env
from gem_core.errors import InvalidArgument
from gem_core.eval import evaluate, read_records, summarize, wilson_interval
from gem_core.eval.records import append_record, write_records
from gem_core.registration import register, registry
from gem_core.rl.rollout import ChatResult

ECHO = "toy:Echo-v0"
KW = dict(api="chat", base_url="http://unused.invalid/v1", model="scripted", progress=False)


class Reply:
    """A chat policy answering ``text`` to everything, with usage counts."""

    def __init__(self, text: str = "nope"):
        self.text = text
        self.calls = 0

    async def chat(self, messages, sampling):
        self.calls += 1
        return ChatResult(self.text, "stop", 1, 1)


def test_a_record_cut_inside_a_utf8_character_is_skipped_not_fatal(tmp_path):
    # SIGKILL can stop a write between the bytes of a multi-byte character.
    f = tmp_path / "episodes.jsonl"
    whole = json.dumps({"env_id": "e", "index": 0, "actions": ["😀"]}, ensure_ascii=False) + "\n"
    cut = json.dumps({"env_id": "e", "index": 1, "actions": ["😀😀"]}, ensure_ascii=False).encode()[:-4]
    f.write_bytes(whole.encode() + cut)
    assert read_records(f) == [{"env_id": "e", "index": 0, "actions": ["😀"]}]
    # Junk that parses as JSON but is no record is skipped too (an index must be an int).
    f.write_text(whole + '{"env_id": "e", "index": "1"}\n[1, 2]\n{"env_id": "e", "index": true}\n')
    assert read_records(f) == [{"env_id": "e", "index": 0, "actions": ["😀"]}]


def test_resume_after_a_write_cut_mid_character_reruns_that_episode(tmp_path):
    out = tmp_path / "run"
    first = evaluate(ECHO, episodes=3, policy=Reply("😀 nope"), out_dir=out, **KW)
    lines = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    cut = lines[2][: lines[2].index("😀".encode()) + 2]  # kill in the middle of the emoji
    (out / "episodes.jsonl").write_bytes(b"".join(lines[:2]) + cut)
    policy = Reply("😀 nope")
    again = evaluate(ECHO, episodes=3, policy=policy, out_dir=out, resume=True, **KW)
    assert again.ran == 1 and policy.calls == 4  # one episode, 4 turns (Echo's limit)
    assert [r["index"] for r in read_records(out / "episodes.jsonl")] == [0, 1, 2]
    strip = [{k: v for k, v in r.items() if k != "latency_s"} for r in again.records]
    assert strip == [{k: v for k, v in r.items() if k != "latency_s"} for r in first.records]


def test_a_lone_surrogate_in_a_reply_is_recorded_not_fatal(tmp_path):
    # json.loads of a server body holding "\ud83d" gives a str UTF-8 cannot encode.
    text = "a\ud83db"
    res = evaluate(ECHO, episodes=2, policy=Reply(text), out_dir=tmp_path / "s", **KW)
    assert res.ran == 2 and not res.missing
    back = read_records(tmp_path / "s" / "episodes.jsonl")
    assert len(back) == 2 and all(r["actions"][0] == text for r in back)
    # Plain text stays readable UTF-8, not \\u escapes.
    with (tmp_path / "plain.jsonl").open("w", encoding="utf-8") as f:
        append_record(f, {"env_id": "e", "index": 0, "a": "😀"})
    assert "😀" in (tmp_path / "plain.jsonl").read_text(encoding="utf-8")
    write_records(tmp_path / "w.jsonl", [{"env_id": "e", "index": 0, "a": "\udcff"}])
    assert read_records(tmp_path / "w.jsonl")[0]["a"] == "\udcff"


def test_wilson_bounds_are_exact_at_no_and_all_successes():
    for n in (1, 3, 7, 10, 50, 1000, 10_000):
        assert wilson_interval(0, n)[0] == 0.0, n
        assert wilson_interval(n, n)[1] == 1.0, n
        lo, hi = wilson_interval(0, n)
        assert 0.0 < hi < 1.0 and 0.0 < wilson_interval(n, n)[0] < 1.0
    # Nothing solved: no turns-to-solve, and the row still has an interval.
    row = summarize([{"env_id": "e", "index": 0, "success": False, "num_turns": 3}])["e"]
    assert row["mean_turns_to_solve"] is None and row["ci95_low"] == 0.0


def test_resume_may_add_episodes_but_not_drop_them(tmp_path):
    out = tmp_path / "run"
    evaluate(ECHO, episodes=4, policy=Reply(), out_dir=out, **KW)
    with pytest.raises(InvalidArgument, match=r"with episodes=2: the run asks for 4 episodes per env "
                       r"and a resume may only add episodes\. Pass --episodes 4 or more"):
        evaluate(ECHO, episodes=2, policy=Reply(), out_dir=out, resume=True, **KW)
    grown = evaluate(ECHO, episodes=6, policy=Reply(), out_dir=out, resume=True, **KW)
    assert grown.ran == 2 and grown.summary[ECHO]["episodes"] == 6
    assert grown.manifest["counts"] == {"wanted": 6, "recorded": 6, "ran_this_call": 2, "missing": 0,
                                        "errored": 0, "measured": 6}


def test_an_out_directory_that_cannot_be_created_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    bad = tmp_path / "a-file" / "run"
    with pytest.raises(InvalidArgument, match=r"cannot write the run directory .*a-file/run "
                       r"\(NotADirectoryError: .*\); pass an --out directory you can create"):
        evaluate(ECHO, episodes=1, policy=Reply(), out_dir=bad, **KW)
    # The CLI says so before it contacts the endpoint (nothing listens on port 9).
    assert main(["eval", ECHO, "--api", "chat", "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m", "--out", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cannot write the run directory" in err and "cannot reach" not in err


class _ResetFails(Env[str, str]):
    """Odd seeds fail in reset; even seeds answer "Correct" to anything."""

    closed = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None and seed % 2:
            raise RuntimeError(f"cannot load task {seed}")
        return f"task {seed}", {}

    def step(self, action):
        return "Correct!", 1.0, True, False, {"success": True}

    def close(self):
        type(self).closed += 1


@pytest.fixture
def failing_env_id():
    env_id = "test:ResetFails-v0"
    register(env_id, _ResetFails, max_turns=2, override=True)
    _ResetFails.closed = 0
    yield env_id
    dict.pop(registry, env_id, None)


@pytest.mark.parametrize("concurrency", [1, 16])
def test_an_env_that_raises_in_reset_flags_its_episode_and_the_run_goes_on(
    failing_env_id, tmp_path, concurrency
):
    res = evaluate(failing_env_id, episodes=5, concurrency=concurrency, policy=Reply(),
                   out_dir=tmp_path / f"c{concurrency}", **KW)
    assert res.ran == 5 and not res.missing and res.manifest["status"] == "complete_with_errors"
    by_index = {r["index"]: r for r in res.records}
    for i in (1, 3):
        assert by_index[i]["error"] == f"env.reset: RuntimeError: cannot load task {i}"
        assert by_index[i]["success"] is False and by_index[i]["num_turns"] == 0
    assert all(by_index[i]["success"] and by_index[i]["error"] is None for i in (0, 2, 4))
    row = res.summary[failing_env_id]
    assert (row["episodes"], row["successes"], row["errors"]) == (5, 3, 2)
    assert row["mean_turns_to_solve"] == 1.0
    assert _ResetFails.closed >= 2  # a failed env is closed, not reused


def test_the_manifest_records_where_dataset_envs_took_their_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("GEM_DATA", "sample")
    monkeypatch.delenv("GEM_DATA_DIR", raising=False)
    res = evaluate("math:GSM8K", episodes=1, policy=Reply("\\boxed{0}"), out_dir=tmp_path / "m", **KW)
    assert res.records[0]["error"] is None
    on_disk = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert on_disk["data_env"]["GEM_DATA"] == "sample" and on_disk["data_env"]["GEM_DATA_DIR"] is None


def test_hostile_records_lines_are_skipped_not_fatal(tmp_path, monkeypatch):
    """Regression (hostile output, part 2): on a shared run dir a 100k-deep JSON line raised
    RecursionError out of `read_records` / `gem report`, and a 50 MB line was read whole."""
    from gem_core.eval import records as rec

    good = {"env_id": "e", "index": 0, "actions": ["a"]}
    f = tmp_path / "episodes.jsonl"
    deep = '{"env_id": "e", "index": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    f.write_text(json.dumps(good) + "\n" + deep + json.dumps({**good, "index": 2}) + "\n")
    assert [r["index"] for r in read_records(f)] == [0, 2]
    monkeypatch.setattr(rec, "MAX_RECORD_BYTES", 1000)  # a line over the cap: skipped, the next read
    f.write_text(json.dumps(good) + "\n" + json.dumps({**good, "index": 1, "x": "y" * 5000}) + "\n"
                 + json.dumps({**good, "index": 2}) + "\n" + json.dumps({**good, "index": 3, "x": "y" * 5000}))
    assert [r["index"] for r in read_records(f)] == [0, 2]


def test_a_too_deep_manifest_is_a_clear_error(tmp_path):
    from gem_core.eval.records import MANIFEST_FILE, read_manifest

    (tmp_path / MANIFEST_FILE).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InvalidArgument, match="not valid JSON"):
        read_manifest(tmp_path)
