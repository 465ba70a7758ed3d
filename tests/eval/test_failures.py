"""`gem eval` runs that cannot measure say so: probe, env pre-build, dead servers, errored episodes.

Every test goes through the CLI (`gem_core.cli.main`) against the local test server of
``conftest.py``; chat-mode tests answer with a scripted ``chat_reply`` (no model runs).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from gem_core.cli import main
from gem_core.core import Env
from gem_core.errors import DependencyNotInstalled, install_command
from gem_core.registration import register, registry

GTN = "game:GuessTheNumber-v0-easy"
ECHO = "toy:Echo-v0"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _chat(server, out, *extra):
    return ["eval", "--api", "chat", "--base-url", server.base_url, "--model", "tiny",
            "--max-tokens", "6", "--out", str(out), "--no-progress", *extra]


def _wrong(messages):
    return "\\boxed{0}"


@pytest.mark.parametrize("mode", ["422", "404", "text"])
def test_a_server_without_token_id_completions_is_refused_up_front(server, tiny, tmp_path, capsys, mode):
    # transformers serve refuses a token-id prompt (422); others lack the route or answer text only.
    server.token_ids = mode
    out = tmp_path / "run"
    rc = main(["eval", GTN, "--base-url", server.base_url, "--model", "tiny", "--tokenizer", tiny[1],
               "--max-tokens", "6", "--episodes", "3", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "does not serve token-id completions" in err and "use --api chat" in err
    assert err.count("does not serve token-id completions") == 1
    assert server.requests == []  # no episode ran
    m = _manifest(out)
    assert m["status"] == "failed" and "token-id completions" in m["error"]
    assert not (out / "episodes.jsonl").exists() or _lines(out / "episodes.jsonl") == []
    # The suggested fix works in the same directory: a failed run with no episode is not a run to mix.
    server.chat_reply = _wrong
    assert main(_chat(server, out, GTN, "--episodes", "2")) == 0, capsys.readouterr().err
    assert _manifest(out)["status"] == "complete" and len(_lines(out / "episodes.jsonl")) == 2


def test_every_request_erroring_stops_the_run_as_failed(server, tmp_path, capsys):
    server.chat_reply = _wrong
    server.script = ["http400"] * 50
    out = tmp_path / "run"
    start = time.monotonic()
    rc = main(_chat(server, out, GTN, "--episodes", "30", "--concurrency", "2", "--max-retries", "0"))
    captured = capsys.readouterr()
    assert rc == 1, captured.err
    assert time.monotonic() - start < 30
    m = _manifest(out)
    assert m["status"] == "failed" and "stopped after 5 consecutive errored episodes" in m["error"]
    assert "HTTP 400" in m["error"]
    recs = _lines(out / "episodes.jsonl")
    assert 5 <= len(recs) < 30 and all(r["error"] for r in recs)
    assert len(server.requests) < 30  # it stopped instead of running every episode
    # Not a score: no success rate, the errors apart, the error printed once (grouped).
    summary = json.loads((out / "summary.json").read_text())[GTN]
    assert summary["measured"] == 0 and summary["success_rate"] is None
    assert summary["errors"] == len(recs) and summary["end_reasons"]["error"] == len(recs)
    assert "0.000 (0/" not in captured.out and "[0.000," not in captured.out
    assert captured.err.count("HTTP 400") == 2  # the failure line and the grouped error line
    assert f"gem eval --resume --retry-errors --out {out}" in captured.err


def test_a_run_where_every_episode_errored_is_failed_even_below_the_limit(server, tmp_path, capsys):
    server.chat_reply = _wrong
    server.script = ["http400"] * 2
    out = tmp_path / "run"
    assert main(_chat(server, out, GTN, "--episodes", "2", "--max-retries", "0")) == 1
    m = _manifest(out)
    assert m["status"] == "failed" and "every episode errored" in m["error"]
    assert m["counts"]["errored"] == 2 and m["counts"]["measured"] == 0
    assert "--retry-errors" in capsys.readouterr().err


def test_a_server_dying_mid_run_stops_it_and_keeps_what_finished(server, tmp_path, capsys):
    server.chat_reply = _wrong
    server.delay = 0.05
    out = tmp_path / "run"

    def kill_after(n):
        while len(server.requests) < n:
            time.sleep(0.01)
        server.kill()

    killer = threading.Thread(target=kill_after, args=(4,), daemon=True)
    killer.start()
    start = time.monotonic()
    rc = main(_chat(server, out, GTN, "--episodes", "40", "--concurrency", "2", "--max-turns", "1",
                    "--max-retries", "1"))
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert rc == 1, err
    assert elapsed < 40, elapsed  # bounded: 5 episodes' retries, not 40
    m = _manifest(out)
    assert m["status"] == "failed" and "consecutive errored episodes" in m["error"]
    recs = _lines(out / "episodes.jsonl")
    good = [r for r in recs if not r["error"]]
    assert len(good) >= 2 and len(recs) < 40
    assert f"gem eval --resume --retry-errors --out {out}" in err
    # The records file is sorted by episode index.
    assert [r["index"] for r in recs] == sorted(r["index"] for r in recs)


class _NeedsExtra(Env[str, str]):
    def __init__(self):
        raise DependencyNotInstalled("reasoning_gym", extra="reasoning", purpose="a test env")


class _NoRows(Env[str, str]):
    def __init__(self, data_path=None):
        from gem_core.data import DatasetUnavailable

        raise DatasetUnavailable(f"test:NoRows-v0: no dataset at {data_path}")


@pytest.fixture
def broken_ids():
    ids = {"test:NeedsExtra-v0": _NeedsExtra, "test:NoRows-v0": _NoRows}
    for env_id, cls in ids.items():
        register(env_id, cls, override=True)
    yield list(ids)
    for env_id in ids:
        dict.pop(registry, env_id, None)


def test_envs_that_cannot_be_built_fail_the_run_before_any_request(server, broken_ids, tmp_path, capsys):
    server.chat_reply = _wrong
    cases = [
        (["test:NeedsExtra-v0"], install_command("reasoning")),
        (["test:NoRows-v0", "--env-kwargs", '{"data_path": "/nowhere"}'], "no dataset at /nowhere"),
        ([GTN, "--env-kwargs", '{"max_turn": 3}'], "did you mean 'max_turns'"),
    ]
    for k, (argv, expected) in enumerate(cases):
        out = tmp_path / f"run{k}"
        rc = main(_chat(server, out, *argv, "--episodes", "10"))
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        assert err.count(expected) == 1, (argv, err)
        assert server.requests == [], argv
        m = _manifest(out)
        assert m["status"] == "failed" and expected in m["error"], argv


def test_errored_episodes_are_counted_apart_with_the_end_breakdown(server, tmp_path, capsys):
    server.chat_reply = lambda messages: "\\boxed{oops" if len(messages) > 2 else "no answer here"
    server.script = ["ok", "http400", "ok", "ok"]
    out = tmp_path / "run"
    rc = main(_chat(server, out, ECHO, GTN, "--episodes", "2", "--concurrency", "1",
                    "--max-retries", "0", "--max-turns", "2"))
    captured = capsys.readouterr()
    assert rc == 1, captured.err  # a run with errored episodes is not a clean measurement
    m = _manifest(out)
    assert m["status"] == "complete_with_errors" and m["counts"]["errored"] == 1
    summary = json.loads((out / "summary.json").read_text())
    rows = {e: summary[e] for e in (ECHO, GTN)}
    assert sum(r["errors"] for r in rows.values()) == 1
    for r in rows.values():
        assert r["measured"] + r["errors"] == r["episodes"] == 2
        assert sum(r["end_reasons"].values()) == 2
    assert "episodes by end:" in captured.out and "turn limit" in captured.out
    assert "--retry-errors" in captured.err
    md = (out / "summary.md").read_text()
    assert "| env | solved | wrong | format error | context exceeded | turn limit | error |" in md


def test_api_key_and_extra_body_reach_the_server_and_the_key_is_not_written(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.chat_reply = _wrong
    out = tmp_path / "run"
    assert main(_chat(server, out, GTN, "--episodes", "1", "--max-turns", "1", "--api-key", "sk-test-123",
                      "--extra-body", '{"top_k": 20, "min_p": 0.05}')) == 0
    assert all(h.get("Authorization") == "Bearer sk-test-123" for h in server.headers)
    assert server.probes and all(b["top_k"] == 20 and b["min_p"] == 0.05 for b in server.probes + server.requests)
    m = _manifest(out)
    assert m["config"]["extra_body"] == {"top_k": 20, "min_p": 0.05} and m["endpoint"]["api_key"] == "set"
    assert "sk-test-123" not in "".join(p.read_text() for p in out.iterdir())
    # The extra body is pinned: a resume with another one is refused, naming it.
    assert main(_chat(server, out, "--resume", "--episodes", "2", "--extra-body", '{"top_k": 5}')) == 2


def test_unreachable_server_fails_the_run_with_a_failed_manifest(tmp_path, capsys):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    out = tmp_path / "run"
    assert main(["eval", GTN, "--api", "chat", "--base-url", f"http://127.0.0.1:{port}/v1",
                 "--model", "m", "--out", str(out), "--no-progress"]) == 2
    assert "cannot reach the model endpoint" in capsys.readouterr().err
    assert _manifest(out)["status"] == "failed"
