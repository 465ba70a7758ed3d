"""`gem eval` with an LLM user simulator and `gem report` across user simulators.

Through the CLI, both roles on local OpenAI-compatible test servers (one per role, chat
replies scripted: no model runs): the assistant replays ``CancelHeadphones``' reference
solution; the user answers from its side of the conversation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gem_core.cli import main
from gem_core.envs.tau.tasks import TASKS, reference_script
from gem_core.multiagent import STOP_TOKEN
from tests.eval.conftest import CompletionsServer, message_text

RETAIL = "tau:Retail-v0"
ONE_TASK = json.dumps({"tasks": ["CancelHeadphones"]})


def _assistant(messages):
    """The reference solution of CancelHeadphones, one action per assistant turn."""
    script = reference_script(TASKS["CancelHeadphones"])
    for _ in range(sum(m["role"] == "assistant" for m in messages)):
        next(script)
    return next(script)


def _idle_assistant(messages):
    return "Is there anything else I can help you with?"


def _user(confirms: bool):
    def reply(messages):
        assert "role-playing a customer" in message_text(messages[0]), "the user's system prompt"
        last = message_text(messages[-1]).casefold()
        if len(messages) == 2:
            return "Hi, I want to cancel my order #R1002; I don't need it anymore."
        if "confirm" in last:
            return "Yes, go ahead." if confirms else "Hmm, I am not sure."
        if "email" in last:
            return "ava.moore@example.com"
        return f"No, that's all. {STOP_TOKEN}"

    return reply


@pytest.fixture
def servers():
    made: dict[str, CompletionsServer] = {}

    def serve(name, reply):
        made[name] = srv = CompletionsServer(None)  # every reply from chat_reply
        srv.chat_reply = reply
        return srv

    yield serve
    for srv in made.values():
        srv.close()


def _eval(assistant, out, *extra):
    return ["eval", RETAIL, "--api", "chat", "--base-url", assistant.base_url, "--model", "alpha",
            "--env-kwargs", ONE_TASK, "--concurrency", "1", "--max-retries", "0", "--out", str(out),
            "--no-progress", *extra]


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _on_disk(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(out.rglob("*")) if p.is_file())


def test_both_roles_through_the_cli_the_user_is_pinned_and_its_key_never_written(servers, tmp_path, capsys):
    asst, user = servers("assistant", _assistant), servers("user", _user(True))
    out = tmp_path / "run"
    argv = _eval(asst, out, "--episodes", "2", "--api-key", "sk-asst-SECRET-1", "--user-base-url",
                 user.base_url, "--user-model", "org/good-user", "--user-temperature", "0.3",
                 "--user-max-tokens", "64", "--user-api-key", "sk-user-SECRET-2")
    assert main(argv) == 0, capsys.readouterr().err
    m = _manifest(out)
    assert m["status"] == "complete" and m["counts"]["measured"] == 2
    assert m["user_simulator"] == {
        "kind": "llm", "base_url": user.base_url, "model": "org/good-user", "temperature": 0.3,
        "top_p": 1.0, "max_tokens": 64, "extra_body": {}, "stop_token": STOP_TOKEN,
        "route": "/chat/completions", "api_key": "set"}
    assert m["config"]["user"]["model"] == "org/good-user" and "api_key" not in m["config"]["user"]
    assert m["config"]["env_kwargs"] == {"tasks": ["CancelHeadphones"]}
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r["success"] for r in records] == [True, True], records
    # Each role went to its own server, the user with its sampling and its own key.
    assert {b["model"] for b in asst.requests} == {"alpha"}
    assert {b["model"] for b in user.requests} == {"org/good-user"}
    assert {(b["temperature"], b["max_tokens"]) for b in user.requests} == {(0.3, 64)}
    assert [b["model"] for b in user.probes] == ["org/good-user"]  # probed before the run
    assert all(h.get("Authorization") == "Bearer sk-user-SECRET-2" for h in user.headers)
    assert all(h.get("Authorization") == "Bearer sk-asst-SECRET-1" for h in asst.headers)
    disk = _on_disk(out)
    assert "SECRET" not in disk, "an API key was written to the run directory"
    assert "user simulator: good-user" in (out / "summary.md").read_text()


def test_a_key_in_env_kwargs_or_an_abbreviated_flag_is_not_written(servers, tmp_path, capsys):
    asst, user = servers("assistant", _assistant), servers("user", _user(True))
    out = tmp_path / "run"
    spec = {"tasks": ["CancelHeadphones"], "user": {"kind": "llm", "base_url": user.base_url,
                                                    "model": "good-user", "api_key": "sk-json-SECRET"}}
    argv = _eval(asst, out, "--episodes", "1", "--api-k", "sk-abbrev-SECRET")
    argv[argv.index(ONE_TASK)] = json.dumps(spec)  # --env-kwargs with the user's key inside
    assert main(argv) == 0, capsys.readouterr().err
    m = _manifest(out)
    assert m["user_simulator"]["model"] == "good-user" and m["config"]["env_kwargs"] == {"tasks": ["CancelHeadphones"]}
    assert all(h.get("Authorization") == "Bearer sk-json-SECRET" for h in user.headers)
    assert all(h.get("Authorization") == "Bearer sk-abbrev-SECRET" for h in asst.headers)
    assert "SECRET" not in _on_disk(out), "an API key was written to the run directory"
    assert any('"api_key": "***"' in arg for arg in m["command_line"]), m["command_line"]


def test_resume_with_another_user_model_is_refused_naming_it_a_moved_server_is_not(servers, tmp_path, capsys):
    asst, user = servers("assistant", _assistant), servers("user", _user(True))
    out = tmp_path / "run"
    assert main(_eval(asst, out, "--episodes", "1", "--user-base-url", user.base_url,
                      "--user-model", "good-user")) == 0, capsys.readouterr().err
    capsys.readouterr()
    n = len(asst.requests) + len(user.requests)
    assert main(["eval", "--resume", "--out", str(out), "--episodes", "2", "--user-model", "other-user"]) == 2
    err = capsys.readouterr().err
    assert "another user simulator (model: run has 'good-user', got 'other-user')" in err, err
    assert main(["eval", "--resume", "--out", str(out), "--episodes", "2", "--user-temperature", "1"]) == 2
    assert "temperature: run has 0.0, got 1.0" in capsys.readouterr().err
    assert len(asst.requests) + len(user.requests) == n  # refused before any request
    # The run's own user simulator (from the manifest), served elsewhere now: resumes.
    moved = servers("moved", _user(True))
    assert main(["eval", "--resume", "--out", str(out), "--episodes", "2",
                 "--user-base-url", moved.base_url]) == 0, capsys.readouterr().err
    m = _manifest(out)
    assert m["status"] == "complete" and m["counts"]["recorded"] == 2
    assert m["user_simulator"]["base_url"] == moved.base_url and m["resumes"][-1]["user_base_url"] == moved.base_url
    assert moved.requests and {b["model"] for b in moved.requests} == {"good-user"}


def test_a_dead_user_endpoint_fails_the_run_loudly(servers, tmp_path, capsys):
    asst, user = servers("assistant", _assistant), servers("user", _user(True))
    user.kill()
    out = tmp_path / "run"
    assert main(_eval(asst, out, "--user-base-url", user.base_url, "--user-model", "good-user")) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the user simulator's endpoint at {user.base_url}" in err and "--user-base-url" in err
    m = _manifest(out)
    assert m["status"] == "failed" and "EndpointUnreachable" in m["error"], m
    assert not asst.requests and not (out / "episodes.jsonl").exists()


def test_a_user_endpoint_that_refuses_the_probe_fails_the_run(servers, tmp_path, capsys):
    asst, user = servers("assistant", _assistant), servers("user", _user(True))
    user.refuse = 401  # a wrong key: every POST refused, the probe included
    out = tmp_path / "run"
    assert main(_eval(asst, out, "--user-base-url", user.base_url, "--user-model", "u")) == 2
    err = capsys.readouterr().err
    assert "(user simulator's endpoint) refused the probe request" in err and "--user-api-key" in err, err
    m = _manifest(out)
    assert m["status"] == "failed" and "EndpointIncompatible" in m["error"], m
    assert not asst.requests


@pytest.mark.parametrize("extra,message", [
    (["--user-model", "u"], "--user-model need(s) an LLM user simulator: pass --user-base-url too"),
    (["--user-temperature", "0.5"], "pass --user-base-url and --user-model too"),
    (["--user-model", "u", "--user-base-url", "http://127.0.0.1:9/v1", "--env-kwargs",
      '{"user": "scripted"}'], "both set the user simulator; give it once"),
    (["--user-model", "u", "--user-base-url", "127.0.0.1:9"], "needs base_url, the API root"),
    (["--user-model", "u", "--user-base-url", "http://127.0.0.1:9/v1", "--user-max-tokens", "0"],
     "the LLM user simulator's max_tokens must be an int >= 1, got 0"),
    (["--env-kwargs", '{"user": {"kind": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "u", '
      '"temperature": "hot"}}'], "the LLM user simulator's temperature must be a number >= 0, got 'hot'"),
    (["--env-kwargs", '{"user": {"kind": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "u", '
      '"temprature": 1}}'], "unknown field(s) ['temprature']"),
])
def test_bad_user_flags_are_clear_errors(servers, tmp_path, capsys, extra, message):
    asst = servers("assistant", _assistant)
    assert main(_eval(asst, tmp_path / "run", *extra)) == 2
    assert message in capsys.readouterr().err
    assert not asst.requests and not asst.probes


def test_user_flags_for_an_env_without_a_user_are_refused(servers, tmp_path, capsys):
    asst = servers("assistant", _assistant)
    argv = ["eval", "game:GuessTheNumber-v0-easy", "--api", "chat", "--base-url", asst.base_url,
            "--model", "alpha", "--user-base-url", asst.base_url, "--user-model", "u",
            "--out", str(tmp_path / "run"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "game:GuessTheNumber-v0-easy take(s) no user simulator" in err and "tau:Retail-v0" in err, err
    assert not asst.probes


def test_report_compares_assistants_across_user_simulators(servers, tmp_path, capsys):
    alpha, beta = servers("alpha", _assistant), servers("beta", _idle_assistant)
    good, stubborn = servers("good", _user(True)), servers("stubborn", _user(False))
    runs = []
    for name, asst, user, model in (("a-good", alpha, good, "org/good-user"),
                                    ("a-stubborn", alpha, stubborn, "stubborn-user"),
                                    ("b-good", beta, good, "org/good-user")):
        out = tmp_path / name
        argv = _eval(asst, out, "--episodes", "2", "--user-base-url", user.base_url, "--user-model", model)
        if asst is beta:
            argv[argv.index("alpha")] = "org/beta"
        assert main(argv) == 0, capsys.readouterr().err
        runs.append(str(out))
    scripted = tmp_path / "a-scripted"  # the env's own scripted user: its own column
    assert main(_eval(alpha, scripted, "--episodes", "2")) == 0, capsys.readouterr().err
    assert _manifest(scripted)["user_simulator"] == {"kind": "scripted", "default": True}
    runs.append(str(scripted))
    rep = tmp_path / "report"
    assert main(["report", *runs, "--out", str(rep)]) == 0, capsys.readouterr().err
    md = (rep / "report.md").read_text()
    assert "## Assistant success by user simulator" in md and f"### {RETAIL}" in md
    assert "| assistant \\ user | good-user | stubborn-user | scripted |" in md, md
    assert "| alpha | 1.000 [0.342, 1.000] (2/2) | 0.000 [0.000, 0.658] (0/2) | 1.000 [0.342, 1.000] (2/2) |" in md, md
    assert "| beta | 0.000 [0.000, 0.658] (0/2) | - | - |" in md, md
    assert "- user simulator: model `org/good-user` at " in md
    assert "## alpha vs good-user\n" in md and "## alpha vs scripted\n" in md and "## beta\n" in md
    assert "![success by user simulator](success_by_user.png)" in md
    data = (rep / "success_by_user.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_a_user_endpoint_failing_mid_run_errors_episodes_not_the_assistant(servers, tmp_path, capsys):
    asst, user = servers("assistant", _assistant), servers("user", _user(True))
    user.script = ["http500"] * 10  # the probe passes; every user message then fails
    out = tmp_path / "run"
    assert main(_eval(asst, out, "--episodes", "4", "--max-consecutive-errors", "2",
                      "--user-base-url", user.base_url, "--user-model", "good-user")) == 1
    err = capsys.readouterr().err
    assert "UserSimulatorError: the LLM user simulator failed: HTTP 500" in err, err
    m = _manifest(out)
    assert m["status"] == "failed" and "stopped after 2 consecutive errored episodes" in m["error"], m
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert records and all(r["error"] and not r["success"] for r in records), records
    assert "--resume --retry-errors" in err
