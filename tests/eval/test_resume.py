"""`gem eval --resume` never changes the data: pinned environment, data hashes, registrations, command lines.

Through the CLI against the local test server (chat mode, scripted replies: no model runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gem_core.data
from gem_core.cli import main
from gem_core.registration import register, registry
from tests.testing_env import GenericTestEnv

GSM = "math:GSM8K"
SAMPLE = Path(gem_core.data.SAMPLES_DIR) / "axon-rl__GSM-8k" / "train.jsonl"


def _chat(server, out, *extra):
    return ["eval", "--api", "chat", "--base-url", server.base_url, "--model", "tiny",
            "--max-tokens", "6", "--out", str(out), "--no-progress", *extra]


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture
def boxed(server):
    server.chat_reply = lambda messages: "\\boxed{0}"
    gem_core.data.clear_cache()
    yield server
    gem_core.data.clear_cache()


def test_resume_under_a_changed_gem_data_is_refused_naming_it(boxed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GEM_DATA", "sample")
    monkeypatch.delenv("GEM_DATA_DIR", raising=False)
    out = tmp_path / "run"
    assert main(_chat(boxed, out, GSM, "--episodes", "2")) == 0, capsys.readouterr().err
    m = _manifest(out)
    assert m["data_env"]["GEM_DATA"] == "sample"
    (pinned,) = m["data"][GSM]
    assert pinned["source"].startswith("sample:") and len(pinned["sha256"]) == 64 and pinned["rows"] > 0
    capsys.readouterr()
    n = len(boxed.requests)
    monkeypatch.delenv("GEM_DATA")
    assert main(_chat(boxed, out, "--resume", "--episodes", "3")) == 2
    err = capsys.readouterr().err
    assert "GEM_DATA: run has 'sample', now None" in err and "GEM_DATA=sample" in err
    assert len(boxed.requests) == n  # refused before any request
    # Under the pinned value it resumes, and the manifest keeps both command lines.
    monkeypatch.setenv("GEM_DATA", "sample")
    assert main(_chat(boxed, out, "--resume", "--episodes", "3")) == 0, capsys.readouterr().err
    m = _manifest(out)
    assert m["status"] == "complete" and m["counts"]["recorded"] == 3
    assert m["command_line"][:3] == ["gem", "eval", "--api"] and "--resume" not in m["command_line"]
    assert m["resumes"][0]["command_line"][-3:] == ["--resume", "--episodes", "3"]
    assert len(m["resumes"]) == 1 and m["data"][GSM][0]["sha256"] == pinned["sha256"]


def test_resume_refuses_a_data_file_whose_content_changed(boxed, tmp_path, capsys):
    data = tmp_path / "gsm.jsonl"
    rows = SAMPLE.read_text().splitlines()
    data.write_text("\n".join(rows) + "\n")
    out = tmp_path / "run"
    kwargs = json.dumps({"data_path": str(data)})
    assert main(_chat(boxed, out, GSM, "--episodes", "2", "--env-kwargs", kwargs)) == 0
    first = json.loads(rows[0])
    first["answer"] = "changed"
    data.write_text("\n".join([json.dumps(first), *rows[1:]]) + "\n")
    gem_core.data.clear_cache()  # what a new process would see
    capsys.readouterr()
    assert main(_chat(boxed, out, "--resume", "--episodes", "4")) == 2
    err = capsys.readouterr().err
    assert f"{GSM} now reads other data than the run was made with" in err and "sha256" in err
    assert json.loads((out / "summary.json").read_text())[GSM]["episodes"] == 2  # nothing mixed in


def test_resume_refuses_a_changed_env_registration(boxed, tmp_path, capsys):
    env_id = "test:Pinned-v0"
    register(env_id, GenericTestEnv, kwargs={"episode_len": 2}, override=True)
    try:
        out = tmp_path / "run"
        assert main(_chat(boxed, out, env_id, "--episodes", "1")) in (0, 1)
        register(env_id, GenericTestEnv, kwargs={"episode_len": 5}, override=True)
        capsys.readouterr()
        assert main(_chat(boxed, out, "--resume", "--episodes", "2")) == 2
        err = capsys.readouterr().err
        assert f"the registration of {env_id} changed since the run began (kwargs" in err
    finally:
        dict.pop(registry, env_id, None)


def test_resume_of_a_missing_run_says_there_is_no_manifest(tmp_path, capsys):
    assert main(["eval", "--resume", "--out", str(tmp_path / "nope"), "--api", "chat"]) == 2
    err = capsys.readouterr().err
    assert "it does not exist, so there is no run (manifest) to continue" in err
    (tmp_path / "empty").mkdir()
    assert main(["eval", "--resume", "--out", str(tmp_path / "empty")]) == 2
    assert "holds no manifest.json" in capsys.readouterr().err


def test_resume_with_api_chat_needs_no_tokenizer(boxed, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    assert main(_chat(boxed, out, "toy:Echo-v0", "--episodes", "1", "--max-turns", "1")) in (0, 1)
    # No tokenizer anywhere: a completions-mode tokenizer load would fail loudly.
    import gem_core.eval.runner as runner

    monkeypatch.setattr(runner, "_load_tokenizer", lambda name: pytest.fail(f"asked for tokenizer {name}"))
    rc = main(["eval", "--resume", "--out", str(out), "--api", "chat", "--episodes", "2",
               "--no-progress"])
    assert rc in (0, 1), capsys.readouterr().err
    assert _manifest(out)["counts"]["recorded"] == 2


def test_resume_with_another_api_mode_names_the_mode_not_a_tokenizer(boxed, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_chat(boxed, out, "toy:Echo-v0", "--episodes", "1", "--max-turns", "1")) in (0, 1)
    manifest = _manifest(out)  # as a token-id run records itself
    manifest["config"].update(api="completions", tokenizer="some/tokenizer")
    (out / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    sent = len(boxed.requests)
    rc = main(["eval", "--resume", "--out", str(out), "--api", "chat", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"cannot resume {out} with --api chat: the run was made with --api completions" in err
    assert "tokenizer" not in err and "Resume without --api" in err
    assert len(boxed.requests) == sent  # refused before any request


def test_no_request_seed_sends_no_seed_and_is_pinned(boxed, tmp_path, capsys):
    seeded, unseeded = tmp_path / "seeded", tmp_path / "unseeded"
    args = ("toy:Echo-v0", "--episodes", "2", "--max-turns", "1", "--temperature", "1.0")
    assert main(_chat(boxed, seeded, *args)) in (0, 1)
    assert [("seed" in b) for b in boxed.requests] == [True, True]
    assert _manifest(seeded)["config"]["request_seed"] is True
    boxed.requests.clear()
    assert main(_chat(boxed, unseeded, *args, "--no-request-seed")) in (0, 1)
    assert len(boxed.requests) == 2 and not any("seed" in b for b in boxed.requests), boxed.requests
    assert _manifest(unseeded)["config"]["request_seed"] is False
    records = [json.loads(line) for line in (unseeded / "episodes.jsonl").read_text().splitlines()]
    assert [r["sampling_seed"] for r in records] == [None, None]
    capsys.readouterr()
    # A resume keeps the choice: sending seeds now would mix two kinds of episodes.
    assert main(["eval", "--resume", "--out", str(seeded), "--no-request-seed", "--episodes", "3",
                 "--no-progress"]) == 2
    assert "request_seed: run has True, got False" in capsys.readouterr().err
    # A run from before the setting existed sent seeds: it resumes as such.
    manifest = _manifest(seeded)
    del manifest["config"]["request_seed"]
    (seeded / "manifest.json").write_text(json.dumps(manifest))
    assert main(["eval", "--resume", "--out", str(seeded), "--episodes", "3", "--no-progress"]) in (0, 1)
