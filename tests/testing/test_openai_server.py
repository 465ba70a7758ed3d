"""Tests for gem_core.testing.openai_server: routes, probes, usage and the model-less answers.

The scripted failure modes are exercised by the clients' own tests (tests/rl/test_policies.py,
tests/eval/); these cover what the fake itself promises."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from gem_core.testing.openai_server import FakeOpenAIServer, message_text

MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "two words"}]}]


def _post(server: FakeOpenAIServer, route: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        server.base_url + route, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _chat(max_tokens: int = 5) -> dict:
    return {"messages": MESSAGES, "max_tokens": max_tokens, "temperature": 1.0, "top_p": 1.0}


def test_chat_reply_usage_and_records():
    with FakeOpenAIServer(chat_reply=lambda messages: "one two three") as server:
        code, payload = _post(server, "/chat/completions", _chat())
        assert code == 200 and payload["choices"][0]["message"]["content"] == "one two three"
        assert payload["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
        assert server.requests == [_chat()] and server.paths == ["/v1/chat/completions"]
        assert server.answers == [(_chat(), payload)]
        server.chat_usage = (11, 3)
        assert _post(server, "/chat/completions", _chat())[1]["usage"]["total_tokens"] == 14


def test_probes_are_kept_apart_and_take_nothing_from_the_script():
    with FakeOpenAIServer(chat_reply=lambda messages: "x") as server:
        server.script = ["http503"]
        code, payload = _post(server, "/chat/completions", _chat(max_tokens=1))
        assert code == 200 and payload["choices"][0]["message"]["content"] == "OK"
        assert server.probes == [_chat(max_tokens=1)] and server.requests == []
        assert server.script == ["http503"] and len(server.headers) == 1
        assert _post(server, "/chat/completions", _chat()) == (503, {"error": "scripted failure"})


def test_unknown_routes_and_models():
    with FakeOpenAIServer() as server:
        assert _post(server, "/embeddings", {"input": "x"}) == (404, {"error": "no such route"})
        assert server.requests == []
        with urllib.request.urlopen(server.base_url + "/models", timeout=10) as answer:
            assert json.loads(answer.read())["data"] == [{"id": "tiny"}]


def test_without_a_model_the_answer_says_what_is_missing():
    with FakeOpenAIServer() as server:
        code, payload = _post(server, "/chat/completions", _chat())
        assert code == 500 and "no policy or chat_reply" in payload["error"]
        prompt = {"prompt": [1, 2], "max_tokens": 4, "temperature": 1.0, "top_p": 1.0}
        code, payload = _post(server, "/completions", prompt)
        assert code == 500 and "pass policy=..." in payload["error"]


def test_a_closed_server_refuses_connections():
    server = FakeOpenAIServer()
    server.close()
    server.close()  # idempotent
    with pytest.raises(urllib.error.URLError):
        _post(server, "/chat/completions", _chat())


def test_message_text_and_the_import_is_light():
    assert message_text({"content": "plain"}) == "plain"
    assert message_text(MESSAGES[0]) == "two words"
    code = ("import sys, gem_core.testing.openai_server; "
            "assert not {'torch', 'transformers'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
