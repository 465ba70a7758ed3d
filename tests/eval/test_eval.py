"""`gem eval` / `gem_core.eval.evaluate` against a local server serving the tiny offline model."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gem_core
from gem_core.cli import main
from gem_core.eval import evaluate, read_records, summarize, wilson_interval
from gem_core.rl.testing import TextPolicy

GTN = "game:GuessTheNumber-v0-easy"
ECHO = "toy:Echo-v0"


def _wilson(k: int, n: int) -> tuple[float, float]:
    """Independent reference: the Wilson interval solved as the quadratic's roots."""
    z = 1.959963984540054
    p = k / n
    a = 1 + z * z / n
    b = -(2 * p + z * z / n)
    c = p * p
    disc = math.sqrt(max(0.0, b * b - 4 * a * c))
    return (-b - disc) / (2 * a), (-b + disc) / (2 * a)


def _cli_args(server, tiny, out, *extra):
    return ["eval", "--base-url", server.base_url, "--model", "tiny", "--tokenizer", tiny[1],
            "--max-tokens", "6", "--out", str(out), "--no-progress", *extra]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_wilson_interval_matches_reference_values():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-5)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == pytest.approx((0.23659, 0.76341), abs=1e-5)
    for k, n in [(1, 3), (7, 9), (20, 20)]:
        assert wilson_interval(k, n) == pytest.approx(_wilson(k, n), abs=1e-12)
    with pytest.raises(ValueError, match=r"need 0 <= successes <= n, got successes=4, n=3"):
        wilson_interval(4, 3)


def test_wilson_interval_refuses_impossible_counts_with_the_hierarchy():
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"need 0 <= successes <= n, got successes=1, n=-1"):
        wilson_interval(1, -1)


def test_cli_eval_writes_records_summary_and_manifest(server, tiny, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(_cli_args(server, tiny, out, GTN, ECHO, "--episodes", "3", "--concurrency", "3",
                        "--seed", "5", "--temperature", "1.0", "--max-turns", "2"))
    assert rc == 0
    printed = capsys.readouterr().out
    assert GTN in printed and ECHO in printed and "95% CI" in printed

    recs = _lines(out / "episodes.jsonl")
    assert sorted((r["env_id"], r["index"], r["seed"]) for r in recs) == sorted(
        (e, i, 5 + i) for e in (GTN, ECHO) for i in range(3)
    )
    for r in recs:
        assert r["error"] is None, r["error"]
        assert 1 <= r["num_turns"] <= 2
        assert len(r["actions"]) == len(r["rewards"]) == len(r["observations"]) == r["num_turns"]
        assert r["return"] == pytest.approx(sum(r["rewards"]))
        assert 0 < r["generated_tokens"] <= 6 * r["num_turns"]
        assert r["prompt_tokens"] > 0 and r["latency_s"] > 0
        assert isinstance(r["success"], bool) and r["sampling_seed"] is not None
    # The model saw the env's own first observation.
    env = gem_core.make(GTN)
    first_obs, _ = env.reset(seed=5)
    assert next(r for r in recs if r["env_id"] == GTN and r["index"] == 0)["observations"][0] == first_obs
    assert all(b["model"] == "tiny" and b["max_tokens"] == 6 and b["temperature"] == 1.0
               for b in server.requests)
    assert len(server.requests) == sum(r["num_turns"] for r in recs)

    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == [GTN, ECHO]
    for env_id, row in summary.items():
        mine = [r for r in recs if r["env_id"] == env_id]
        k = sum(r["success"] for r in mine)
        assert row["episodes"] == 3 and row["successes"] == k
        assert (row["ci95_low"], row["ci95_high"]) == pytest.approx(_wilson(k, 3), abs=1e-9)
        assert row["mean_return"] == pytest.approx(sum(r["return"] for r in mine) / 3)
        assert row["mean_turns"] == pytest.approx(sum(r["num_turns"] for r in mine) / 3)
        assert row["format_error_rate"] == pytest.approx(sum(r["format_errors"] > 0 for r in mine) / 3)
    md = (out / "summary.md").read_text()
    assert f"| {GTN} | 3 |" in md and "Wilson" in md

    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and m["gem_core_version"] == gem_core.__version__
    assert m["command_line"][:2] == ["gem", "eval"] and "--seed" in m["command_line"]
    cfg = m["config"]
    assert cfg["env_ids"] == [GTN, ECHO] and cfg["model"] == "tiny" and cfg["seed"] == 5
    assert (cfg["temperature"], cfg["top_p"], cfg["max_tokens"], cfg["max_turns"]) == (1.0, 1.0, 6, 2)
    assert m["endpoint"]["base_url"] == server.base_url
    assert m["envs"][GTN]["version"] == 0 and m["envs"][GTN]["variant"] == "easy"
    assert m["seeds"]["env_seeds"] == [5, 6, 7]
    assert m["sampling"]["stop_token_ids"] and m["stack"] == {
        "tools": [], "wrappers": [], "order": m["stack"]["order"]}
    # A second run into the same directory must not silently mix runs.
    assert main(_cli_args(server, tiny, out, GTN)) == 2
    assert "already holds a gem eval run; pass --resume" in capsys.readouterr().err


def _echo_policy(tokenizer):
    """Solves Echo when the word starts with a-g, answers empty for h-o, wrongly otherwise."""

    def respond(prompt: str) -> str:
        word = prompt.split("nothing else: ")[1].split()[0].split("<")[0]
        if word[0] < "h":
            return word
        return "" if word[0] < "p" else "nope"

    return TextPolicy(tokenizer, respond)


def test_evaluate_api_summary_is_recomputed_from_records(tiny, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny[1])
    res = evaluate(ECHO, base_url="http://unused.invalid/v1", model="scripted", tokenizer=tiny[1],
                   episodes=12, concurrency=4, policy=_echo_policy(tok), progress=False,
                   out_dir=tmp_path / "api")
    assert res.ran == 12 and not res.interrupted and not res.missing
    wins = [r for r in res.records if r["success"]]
    empties = [r for r in res.records if "" in r["actions"]]
    assert 0 < len(wins) < 12 and empties, "the scripted policy should mix outcomes"
    assert all(r["num_turns"] == 1 and r["rewards"] == [1.0] for r in wins)
    assert all(r["format_errors"] == r["num_turns"] == 4 for r in empties)
    row = res.summary[ECHO]
    assert row["successes"] == len(wins) and row["success_rate"] == len(wins) / 12
    assert row["format_error_rate"] == len(empties) / 12
    assert row["mean_turns_to_solve"] == 1.0
    assert row["mean_return"] == pytest.approx(sum(r["return"] for r in res.records) / 12)
    assert summarize(read_records(tmp_path / "api" / "episodes.jsonl")) == res.summary
    # Same seeds, same episodes: a second run reproduces the records.
    again = evaluate(ECHO, base_url="http://unused.invalid/v1", model="scripted", tokenizer=tiny[1],
                     episodes=12, concurrency=2, policy=_echo_policy(tok), progress=False)
    strip = [{k: v for k, v in r.items() if k != "latency_s"} for r in res.records]
    assert [{k: v for k, v in r.items() if k != "latency_s"} for r in again.records] == strip


def test_bad_server_answers_flag_episodes_and_the_run_finishes(server, tiny, tmp_path):
    server.script = ["ok", "http500", "badjson", "empty", "nochoices", "hang"]
    start = time.monotonic()
    res = evaluate(GTN, base_url=server.base_url, model="tiny", tokenizer=tiny[1], episodes=6,
                   concurrency=1, max_turns=1, max_tokens=6, max_retries=0, timeout=0.5,
                   progress=False, out_dir=tmp_path / "bad")
    assert time.monotonic() - start < 20
    errors = [r["error"] for r in res.records]
    assert errors[0] is None and errors[3] is None
    assert "HTTP 500" in errors[1] and "invalid JSON" in errors[2]
    assert "no choices[0]" in errors[4] and "timed out" in errors[5]
    assert all(r["success"] is False for r in res.records[1:])
    # An empty completion is a (flagged) format error, not a crash.
    assert res.records[3]["actions"] == [""] and res.records[3]["format_errors"] == 1
    row = res.summary[GTN]
    assert row["errors"] == 4 and row["episodes"] == 6
    assert json.loads((tmp_path / "bad" / "summary.json").read_text())[GTN]["errors"] == 4
    # Transient errors are retried: the episodes succeed in getting answers.
    server.script = ["http503", "http500"]
    res = evaluate(GTN, base_url=server.base_url, model="tiny", tokenizer=tiny[1], episodes=1,
                   max_turns=1, max_tokens=4, max_retries=2, progress=False)
    assert res.records[0]["error"] is None and res.records[0]["num_turns"] == 1
    # --resume --retry-errors reruns only the errored episodes.
    n = len(server.requests)
    assert main(["eval", "--resume", "--retry-errors", "--out", str(tmp_path / "bad"),
                 "--base-url", server.base_url, "--no-progress", "--max-retries", "0"]) == 0
    assert len(server.requests) - n == 4
    recs = _lines(tmp_path / "bad" / "episodes.jsonl")
    assert sorted(r["index"] for r in recs) == list(range(6)) and not any(r["error"] for r in recs)


def test_unknown_env_unreachable_endpoint_and_bad_options(tiny, tmp_path, capsys):
    assert main(["eval", "game:GuessTheNumbr-v0-easy", "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m", "--out", str(tmp_path / "a")]) == 2
    assert "Did you mean" in capsys.readouterr().err
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now
    url = f"http://127.0.0.1:{port}/v1"
    assert main(["eval", GTN, "--base-url", url, "--model", "m", "--tokenizer", tiny[1],
                 "--out", str(tmp_path / "b"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the model endpoint at {url}" in err and "--base-url" in err
    assert main(["eval", GTN, "--model", "m"]) == 2
    assert "missing --base-url" in capsys.readouterr().err
    assert main(["eval", GTN, "--base-url", url, "--model", "m", "--tools", "calculator",
                 "--out", str(tmp_path / "c")]) == 2
    assert "unknown tool 'calculator': expected one of python, search" in capsys.readouterr().err


def _spawn(server, tiny, out, *extra):
    # The CLI needs only the tokenizer: keep transformers from importing torch (seconds on a
    # loaded machine) so the run reaches its first episode quickly.
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", USE_TORCH="0")
    return subprocess.Popen(
        [sys.executable, "-m", "gem_core.cli", *_cli_args(server, tiny, out, *extra)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _wait_for_records(path: Path, n: int, proc, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and len([x for x in path.read_text().splitlines() if x.strip()]) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no {n} records in {path} after {timeout} s")


def test_resume_after_a_killed_subprocess(server, tiny, tmp_path):
    out = tmp_path / "killed"
    server.delay = 0.25
    proc = _spawn(server, tiny, out, GTN, "--episodes", "6", "--concurrency", "1", "--max-turns", "1")
    _wait_for_records(out / "episodes.jsonl", 2, proc)
    proc.kill()
    proc.communicate()
    before = {(r["env_id"], r["index"]): r for r in _lines(out / "episodes.jsonl")}
    assert 2 <= len(before) < 6
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"
    server.delay = 0.0
    n = len(server.requests)
    # Settings come from the manifest; only what changes (nothing) needs to be passed.
    assert main(["eval", "--resume", "--out", str(out), "--no-progress"]) == 0
    assert len(server.requests) - n <= 6 - len(before)
    recs = _lines(out / "episodes.jsonl")
    keys = [(r["env_id"], r["index"]) for r in recs]
    assert len(keys) == len(set(keys)) == 6 and sorted(i for _, i in keys) == list(range(6))
    for r in recs:
        if (r["env_id"], r["index"]) in before:
            assert r == before[(r["env_id"], r["index"])]
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and m["counts"]["recorded"] == 6
    assert json.loads((out / "summary.json").read_text())[GTN]["episodes"] == 6
    # A resume with different pinned settings is refused with the difference named.
    assert main(["eval", GTN, "--resume", "--out", str(out), "--seed", "9", "--no-progress"]) == 2


def test_ctrl_c_stops_cleanly_and_keeps_finished_episodes(server, tiny, tmp_path):
    out = tmp_path / "sigint"
    server.delay = 0.25
    proc = _spawn(server, tiny, out, ECHO, "--episodes", "8", "--concurrency", "1", "--max-turns", "1")
    _wait_for_records(out / "episodes.jsonl", 1, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and f"gem eval --resume --out {out}" in stderr
    recs = _lines(out / "episodes.jsonl")
    assert 1 <= len(recs) < 8
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "interrupted" and m["counts"]["recorded"] == len(recs)
    assert json.loads((out / "summary.json").read_text())[ECHO]["episodes"] == len(recs)
    assert ECHO in stdout  # the summary table of what finished


def test_progress_falls_back_to_plain_lines_without_tqdm(tiny, monkeypatch, capsys):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny[1])
    monkeypatch.setitem(sys.modules, "tqdm", None)
    res = evaluate(ECHO, base_url="http://unused.invalid/v1", model="scripted", tokenizer=tiny[1],
                   episodes=3, policy=_echo_policy(tok), progress=True)
    err = capsys.readouterr().err
    k = res.summary[ECHO]["successes"]
    assert f"gem eval: 3/3 episodes, success {k}/3, errors 0" in err


def test_a_first_prompt_over_max_context_fails_before_the_run(server, tiny, tmp_path, capsys):
    """Completions mode renders each env's first prompt before any episode: one that cannot
    fit --max-context stops the run (rc 2) with the size it needs, and no request is sent."""
    out = tmp_path / "ctx"
    rc = main(_cli_args(server, tiny, out, GTN, "--episodes", "2", "--max-context", "40", "--max-tokens", "8"))
    err = capsys.readouterr().err
    assert rc == 2, err
    needed = int(err.split("a turn needs ")[1].split(",")[0])
    assert needed > 40 and f"Set --max-context {needed} or more" in err
    assert f"{GTN}: the first prompt (seed " in err and "with --max-tokens 8" in err
    assert server.requests == []  # the probe only
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"
    # The size it names is enough: the same run with that budget plays its turns.
    rc = main(_cli_args(server, tiny, tmp_path / "ok", GTN, "--episodes", "2", "--max-tokens", "8",
                        "--max-context", str(needed), "--max-turns", "1"))
    assert rc in (0, 1), capsys.readouterr().err
    recs = _lines(tmp_path / "ok" / "episodes.jsonl")
    assert len(recs) == 2 and all(r["num_turns"] == 1 for r in recs)


def test_a_run_in_which_no_episode_took_a_turn_fails(server, tmp_path, capsys):
    """Chat mode (no tokenizer: the server counts): every first request refused as too long
    means the run measured nothing, so it is `failed`, rc 1."""
    out = tmp_path / "ctx"
    server.script = ["context", "context"]
    rc = main(["eval", GTN, "--api", "chat", "--base-url", server.base_url, "--model", "tiny",
               "--episodes", "2", "--max-tokens", "8", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1, err
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "failed" and m["counts"]["measured"] == 2
    assert m["error"].startswith("no episode took a turn: each ended on the context budget")
    assert "must hold the first prompt plus --max-tokens 8" in m["error"]
    assert {r["end_reason"] for r in _lines(out / "episodes.jsonl")} == {"context"}
    assert "no episode took a turn" in err
    # One episode that plays a turn is a measurement again.
    server.script = ["context"]
    rc = main(["eval", GTN, "--api", "chat", "--base-url", server.base_url, "--model", "tiny",
               "--episodes", "2", "--max-tokens", "8", "--max-turns", "1", "--out", str(tmp_path / "ok"),
               "--no-progress"])
    assert rc in (0, 1) and json.loads((tmp_path / "ok" / "manifest.json").read_text())["status"] != "failed"
