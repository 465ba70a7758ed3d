"""`gem eval --api chat`: chat messages to /v1/chat/completions, text back, no tokenizer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import gem_core
from gem_core.cli import main
from gem_core.errors import InvalidArgument
from gem_core.eval import evaluate
from gem_core.rl.rollout import ChatResult, derive_seed
from gem_core.rl.testing import TextPolicy

GTN = "game:GuessTheNumber-v0-easy"
ECHO = "toy:Echo-v0"
CHAT = "/v1/chat/completions"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


class EchoChat:
    """A scripted chat policy for Echo: right for words a-g, empty for h-o, wrong after.

    Reports ``usage`` as (number of messages, reply length) unless ``usage=False``.
    """

    def __init__(self, usage: bool = True, prompt_tokens: int | None = None):
        self.usage = usage
        self.prompt_tokens = prompt_tokens
        self.calls: list[list[dict]] = []

    async def chat(self, messages, sampling):
        self.calls.append([dict(m) for m in messages])
        await asyncio.sleep(0)
        word = messages[0 if messages[0]["role"] == "user" else 1]["content"]
        word = word.split("nothing else: ")[1].split()[0]
        text = word if word[0] < "h" else ("" if word[0] < "p" else "nope")
        if not self.usage:
            return ChatResult(text, "stop")
        prompt = self.prompt_tokens if self.prompt_tokens is not None else len(messages)
        return ChatResult(text, "stop", prompt, len(text))


def test_cli_chat_mode_sends_messages_and_records_server_usage(server, tmp_path, capsys):
    out = tmp_path / "chat"
    rc = main(["eval", GTN, ECHO, "--api", "chat", "--base-url", server.base_url, "--model", "tiny",
               "--max-tokens", "6", "--episodes", "2", "--concurrency", "2", "--seed", "5",
               "--temperature", "1.0", "--max-turns", "2", "--system-prompt", "Be brief.",
               "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert GTN in capsys.readouterr().out
    # Only chat requests, no token ids, and no tokenizer was needed (none was passed).
    assert server.paths and all(p == CHAT for p in server.paths)
    assert all("prompt" not in b and b["model"] == "tiny" and b["max_tokens"] == 6
               and b["temperature"] == 1.0 for b in server.requests)
    recs = _lines(out / "episodes.jsonl")
    assert sorted((r["env_id"], r["index"]) for r in recs) == [(e, i) for e in (GTN, ECHO) for i in (0, 1)]
    assert len(server.requests) == sum(r["num_turns"] for r in recs)
    first_obs = gem_core.make(GTN).reset(seed=5)[0]
    for r in recs:
        assert r["error"] is None and 1 <= r["num_turns"] <= 2
        if r["env_id"] == GTN and r["index"] == 0:
            assert r["observations"][0] == first_obs
        # Each turn's request is the conversation so far, with the per-turn sampling seed;
        # the action is the reply's text; token counts are the sums of the replies' usage.
        prompt_tokens = generated = 0
        for t in range(r["num_turns"]):
            want = [{"role": "system", "content": "Be brief."}]
            for k in range(t + 1):
                want.append({"role": "user", "content": r["observations"][k]})
                if k < t:
                    want.append({"role": "assistant", "content": r["actions"][k]})
            seed = derive_seed(r["sampling_seed"], t)
            (answer,) = [a for b, a in server.answers if b["messages"] == want and b["seed"] == seed]
            assert r["actions"][t] == answer["choices"][0]["message"]["content"]
            prompt_tokens += answer["usage"]["prompt_tokens"]
            generated += answer["usage"]["completion_tokens"]
        assert (r["prompt_tokens"], r["generated_tokens"]) == (prompt_tokens, generated)
        assert 0 < generated <= 6 * r["num_turns"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["api"] == "chat" and m["config"]["tokenizer"] is None
    assert m["endpoint"]["api"] == "chat" and m["endpoint"]["route"] == "/chat/completions"
    assert m["layout"] == "messages" and m["sampling"]["stop_token_ids"] is None
    # The manifest pins the mode: a resume takes it from there, and refuses another one.
    assert main(["eval", "--resume", "--out", str(out), "--api", "completions", "--no-progress"]) == 2
    assert f"cannot resume {out} with --api completions: the run was made with --api chat" in capsys.readouterr().err
    n = len(server.requests)
    assert main(["eval", "--resume", "--out", str(out), "--episodes", "3", "--no-progress"]) == 0
    assert len(server.requests) > n and all(p == CHAT for p in server.paths)
    recs = _lines(out / "episodes.jsonl")
    assert sorted((r["env_id"], r["index"]) for r in recs) == [(e, i) for e in (GTN, ECHO) for i in range(3)]


def test_chat_mode_bad_answers_flag_episodes_and_the_run_finishes(server, tmp_path):
    server.script = ["ok", "http500", "badjson", "empty", "nochoices", "hang", "context",
                     "nousage", "nomessage"]
    res = evaluate(GTN, api="chat", base_url=server.base_url, model="tiny", episodes=9,
                   concurrency=1, max_turns=1, max_tokens=6, max_retries=0, timeout=0.5,
                   progress=False, out_dir=tmp_path / "bad")
    recs = res.records
    errors = [r["error"] for r in recs]
    assert [e is None for e in errors] == [True, False, False, True, False, False, True, True, False]
    assert "HTTP 500" in errors[1] and "invalid JSON" in errors[2]
    assert "no choices[0]" in errors[4] and "timed out" in errors[5]
    assert "expected choices[0].message" in errors[8]
    # An empty reply is a format error for the env, not a crash.
    assert recs[3]["actions"] == [""] and recs[3]["format_errors"] == 1
    # The server said the prompt does not fit: a context end, not an error.
    assert recs[6]["end_reason"] == "context" and recs[6]["num_turns"] == 0
    # No usage in the answer: token counts are unknown, not zero.
    assert recs[7]["num_turns"] == 1 and recs[7]["prompt_tokens"] is None
    assert recs[7]["generated_tokens"] is None
    assert recs[0]["prompt_tokens"] > 0 and recs[0]["generated_tokens"] > 0
    row = res.summary[GTN]
    assert row["errors"] == 5 and row["episodes"] == 9
    # Means are over the measured (non-errored) episodes.
    known = [r["generated_tokens"] for r in recs if r["generated_tokens"] is not None and not r["error"]]
    assert row["mean_generated_tokens"] == pytest.approx(sum(known) / len(known))
    # Transient errors are retried as in completions mode.
    server.script = ["http503", "http500"]
    ok = evaluate(GTN, api="chat", base_url=server.base_url, model="tiny", episodes=1, max_turns=1,
                  max_tokens=4, max_retries=2, progress=False)
    assert ok.records[0]["error"] is None and ok.records[0]["num_turns"] == 1
    # --resume --retry-errors reruns only the errored episodes, in chat mode.
    n = len(server.requests)
    assert main(["eval", "--resume", "--retry-errors", "--out", str(tmp_path / "bad"),
                 "--no-progress", "--max-retries", "0"]) == 0
    assert len(server.requests) - n == 5 and server.paths[-1] == CHAT
    recs = _lines(tmp_path / "bad" / "episodes.jsonl")
    assert sorted(r["index"] for r in recs) == list(range(9)) and not any(r["error"] for r in recs)


def test_evaluate_chat_api_with_a_scripted_policy():
    policy = EchoChat()
    res = evaluate(ECHO, api="chat", base_url="http://unused.invalid/v1", model="scripted",
                   episodes=12, concurrency=4, policy=policy, progress=False,
                   system_prompt="Answer with one word.")
    wins = [r for r in res.records if r["success"]]
    empties = [r for r in res.records if "" in r["actions"]]
    assert 0 < len(wins) < 12 and empties
    assert all(r["num_turns"] == 1 and r["rewards"] == [1.0] for r in wins)
    assert all(r["format_errors"] == r["num_turns"] == 4 for r in empties)
    # Usage: one request per turn, prompt = messages sent (system + 2 per earlier turn + 1).
    for r in res.records:
        turns = r["num_turns"]
        assert r["prompt_tokens"] == sum(2 + 2 * t for t in range(turns))
        assert r["generated_tokens"] == sum(len(a) for a in r["actions"])
    # Later turns carry the earlier replies (also empty ones) as assistant messages.
    long = max(policy.calls, key=len)
    assert long[0] == {"role": "system", "content": "Answer with one word."}
    assert [m["role"] for m in long[1:]] == ["user", "assistant"] * 3 + ["user"]
    assert all(m["content"] == "" for m in long[2::2]) or all(m["content"] == "nope" for m in long[2::2])
    assert res.summary[ECHO]["successes"] == len(wins)
    # No usage: counts are None, and the summary's mean has nothing to average.
    res = evaluate(ECHO, api="chat", base_url="http://unused.invalid/v1", model="scripted",
                   episodes=2, policy=EchoChat(usage=False), progress=False)
    assert all(r["prompt_tokens"] is None and r["generated_tokens"] is None for r in res.records)
    assert res.summary[ECHO]["mean_generated_tokens"] is None


def test_chat_context_budget_is_checked_from_usage():
    # Each reply reports 100 prompt tokens and len(reply) generated ("nope": 4).
    def run(max_context):
        return evaluate(ECHO, api="chat", base_url="http://unused.invalid/v1", model="s",
                        episodes=1, seed=3, max_tokens=16, max_context=max_context, max_turns=3,
                        policy=EchoChat(prompt_tokens=100), progress=False).records[0]

    rec = run(10_000)
    assert rec["actions"][0] == "nope", "seed 3 should give a word the policy answers wrongly"
    assert rec["num_turns"] == 3 and rec["end_reason"] == "max_turns"
    rec = run(100 + 4 + 16 - 1)  # the next request would need at least 100 + 4 + 16 tokens
    assert rec["num_turns"] == 1 and rec["end_reason"] == "context" and rec["error"] is None
    assert run(100 + 4 + 16)["num_turns"] == 3


def test_chat_api_argument_errors(tiny, tmp_path):
    kw = dict(base_url="http://unused.invalid/v1", model="m", progress=False)
    with pytest.raises(InvalidArgument, match=r"unknown api 'chatty': expected one of completions, chat"):
        evaluate(ECHO, api="chatty", **kw)
    with pytest.raises(InvalidArgument, match=r"tokenizer='x' only applies to api='completions'.*drop --tokenizer"):
        evaluate(ECHO, api="chat", tokenizer="x", **kw)
    with pytest.raises(InvalidArgument, match=r"env_calls must be one of \('auto', 'thread', 'inline'\), got 'fast'"):
        evaluate(ECHO, api="chat", env_calls="fast", **kw)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny[1])
    with pytest.raises(InvalidArgument, match=r"policy TextPolicy does not fit api='chat': it needs an async chat"):
        evaluate(ECHO, api="chat", policy=TextPolicy(tok, str), **kw)
    with pytest.raises(InvalidArgument, match=r"policy EchoChat does not fit api='completions'.*pass api='chat'"):
        evaluate(ECHO, policy=EchoChat(), tokenizer=tiny[1], **kw)
    assert main(["eval", ECHO, "--api", "chat", "--tokenizer", tiny[1], "--base-url",
                 "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "x")]) == 2


def test_chat_mode_runs_tools_over_http(server):
    """Turn 1 calls the python tool; turn 2 answers with the tool's output (always 5)."""
    import re

    def reply(messages):
        if len([m for m in messages if m["role"] == "user"]) == 1:
            return "<python>print(2 + 3)</python>"
        return "\\boxed{" + re.findall(r"Code execution result: (\d+)", messages[-1]["content"])[-1] + "}"

    server.chat_reply = reply
    res = evaluate(GTN, api="chat", base_url=server.base_url, model="tiny", episodes=2,
                   tools=["python"], max_turns=2, progress=False)
    for r in res.records:
        assert r["error"] is None and r["tool_calls"] == {"python": 1}
        assert r["actions"] == ["<python>print(2 + 3)</python>", "\\boxed{5}"]
        assert r["rewards"][0] == 0.0 and isinstance(r["prompt_tokens"], int)
    assert res.summary[GTN]["tool_calls_by_name"] == {"python": 2}


def test_chat_mode_cli_imports_no_tokenizer_stack(server, tmp_path):
    """The chat mode needs neither transformers nor torch on the client."""
    import subprocess
    import sys

    server.chat_reply = lambda messages: "\\boxed{3}"
    code = (
        "import sys; from gem_core.cli import main; "
        f"rc = main(['eval', {GTN!r}, '--api', 'chat', '--base-url', {server.base_url!r}, "
        f"'--model', 'tiny', '--episodes', '2', '--max-turns', '1', '--out', {str(tmp_path / 'r')!r}, "
        "'--no-progress']); "
        "print('RESULT', rc, 'transformers' in sys.modules, 'torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RESULT 0 False False" in proc.stdout, proc.stderr
    assert len(server.answers) == 2
