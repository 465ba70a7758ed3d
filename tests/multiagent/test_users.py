"""Tests for the user simulators: ScriptedUser rules, LLMUser, and gem eval of tau:Retail-v0 with an LLM
user, both roles served by the local OpenAI-compatible test server."""

from __future__ import annotations

import json

import pytest

from gem_core.envs.tau.env import RetailEnv, make_retail_env
from gem_core.envs.tau.tasks import TASKS, reference_script
from gem_core.errors import InvalidArgument
from gem_core.eval import evaluate
from gem_core.multiagent import (
    STOP_TOKEN,
    LLMUser,
    ScriptedUser,
    UserScript,
    UserSimulatorError,
    as_single_agent,
    make_user,
)
from gem_core.testing.openai_server import FakeOpenAIServer, message_text

SCRIPT = UserScript(
    opening="Cancel my order.",
    facts=((("email",), "a@example.com"), (("reason",), "Not needed.")),
    followups=("Also, one more thing.",),
)


def test_scripted_user_follows_its_rules_in_order():
    user = ScriptedUser()
    info = {"user_script": SCRIPT, "user_turn": 0}
    assert user.act("Hi!", info) == "Cancel my order."
    info["user_turn"] = 1
    assert user.act("What is your EMAIL?", info) == "a@example.com"
    assert user.act("Do you confirm the reason (yes/no)?", info) == SCRIPT.confirm  # confirmation first
    assert user.act("Why? Give a reason.", info) == "Not needed."
    assert user.act("Done.", info) == "Also, one more thing."
    assert STOP_TOKEN in user.act("Anything else?", info)
    info["user_turn"] = 0  # a new episode starts over
    assert user.act("Hi!", info) == "Cancel my order."


def test_scripted_user_without_a_script_says_what_it_needs():
    with pytest.raises(UserSimulatorError, match=r"needs info\['user_script'\]"):
        ScriptedUser().act("hi", {})


def test_user_script_is_validated():
    with pytest.raises(InvalidArgument, match="must contain '###STOP###'"):
        UserScript("hi", stop="bye")
    with pytest.raises(InvalidArgument, match="lower-case"):
        UserScript("hi", facts=((("Email",), "x"),))


@pytest.mark.parametrize("spec,kind", [(None, ScriptedUser), ("scripted", ScriptedUser), ({"kind": "scripted"}, ScriptedUser)])
def test_make_user_specs(spec, kind):
    assert isinstance(make_user(spec), kind)


def test_make_user_rejects_unknown_specs_and_llm_without_endpoint():
    with pytest.raises(InvalidArgument, match="expected {'kind': 'llm'"):
        make_user({"kind": "gpt"})
    with pytest.raises(InvalidArgument, match="LLMUser needs base_url and model"):
        make_user({"kind": "llm"})


class FakeChat:
    def __init__(self, replies):
        self.replies = list(replies)
        self.calls = []

    def chat_sync(self, messages, sampling):
        from gem_core.rl.sampling import ChatResult

        self.calls.append(([dict(m) for m in messages], sampling))
        return ChatResult(self.replies.pop(0), "stop", None, None)


def test_llm_user_gets_the_tasks_instructions_as_system_prompt_and_the_history():
    chat = FakeChat(["I want to cancel #R1002.", f"Thanks! {STOP_TOKEN}"])
    view = as_single_agent(RetailEnv(["CancelHeadphones"]), "assistant", {"user": LLMUser(client=chat)})
    obs, _ = view.reset(seed=5)
    assert obs.endswith("User: I want to cancel #R1002.")
    obs, reward, terminated, truncated, info = view.step("Anything else?")
    assert terminated and info["end_reason"] == "user_stop" and info["failed_check"] == "database"
    messages, sampling = chat.calls[1]
    assert messages[0]["role"] == "system" and "You are Ava Moore; your email is ava.moore@example.com." in messages[0]["content"]
    assert STOP_TOKEN in messages[0]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"] == "Anything else?"
    assert sampling.seed is not None and sampling.seed != chat.calls[0][1].seed


def test_an_llm_user_that_fails_raises_a_named_error():
    from gem_core.rl.sampling import PolicyError

    class Down:
        def chat_sync(self, messages, sampling):
            raise PolicyError("HTTP 500 from http://x/v1/chat/completions")

    view = as_single_agent(RetailEnv(), "assistant", {"user": LLMUser(client=Down())})
    with pytest.raises(UserSimulatorError, match="the LLM user simulator failed: HTTP 500"):
        view.reset(seed=0)


# --- gem eval's Python face, both roles on the local OpenAI-compatible server ------------
def _is_user_request(messages):
    return messages[0]["role"] == "system" and "role-playing a customer" in message_text(messages[0])


def _role_play(messages, *, user_stops=True):
    """Both roles: the assistant replays CancelHeadphones' reference; the user answers."""
    if _is_user_request(messages):
        last = message_text(messages[-1]).casefold()
        if not user_stops:
            return "Hmm, tell me more."
        if len(messages) == 2:
            return "Hi, I want to cancel my order #R1002; I don't need it anymore."
        if "confirm" in last:
            return "Yes, go ahead."
        if "email" in last:
            return "ava.moore@example.com"
        return f"No, that's all. {STOP_TOKEN}"
    turns = sum(m["role"] == "assistant" for m in messages)
    script = reference_script(TASKS["CancelHeadphones"])
    for _ in range(turns):
        next(script)
    return next(script)


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:  # every reply comes from chat_reply: no model needed
        yield srv


def test_eval_with_an_llm_user_on_the_test_server_for_both_roles(server, tmp_path):
    server.chat_reply = _role_play
    user = {"kind": "llm", "base_url": server.base_url, "model": "user-sim", "max_retries": 0}
    res = evaluate(
        "tau:Retail-v0", base_url=server.base_url, model="assistant", api="chat", episodes=2,
        concurrency=1, env_kwargs={"tasks": ["CancelHeadphones"], "user": user},
        out_dir=tmp_path / "run", progress=False,
    )  # fmt: skip
    assert res.manifest["status"] == "complete", res.manifest
    assert [r["success"] for r in res.records] == [True, True], res.records
    assert res.summary["tau:Retail-v0"]["success_rate"] == 1.0
    models = [b["model"] for b in server.requests]
    assert {"assistant", "user-sim"} <= set(models), models
    user_bodies = [b for b in server.requests if b["model"] == "user-sim"]
    assert "Goal: Cancel your pending order #R1002" in user_bodies[0]["messages"][0]["content"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "user-sim" in json.dumps(manifest), "the user simulator's model must be pinned in the manifest"


def test_eval_with_an_llm_user_that_never_ends_is_truncated_not_an_error(server):
    server.chat_reply = lambda messages: (
        _role_play(messages, user_stops=False) if _is_user_request(messages) else "Could you tell me more?"
    )
    user = {"kind": "llm", "base_url": server.base_url, "model": "user-sim", "max_retries": 0}
    res = evaluate(
        "tau:Retail-v0", base_url=server.base_url, model="assistant", api="chat", episodes=1,
        env_kwargs={"user": user, "max_turns": 4}, progress=False,
    )  # fmt: skip
    (record,) = res.records
    assert record["error"] is None and record["success"] is False, record
    assert record["end_reason"] == "env_truncated", record
    assert record["final_observation"].endswith("The turn limit (4) is reached; the conversation is over.")
    assert sum(b["model"] == "user-sim" for b in server.requests) == 4  # the opening and 3 replies


def test_make_retail_env_with_an_llm_user_spec_builds_no_connection():
    env = make_retail_env(user={"kind": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert repr(env.others["user"]).startswith("LLMUser(http://127.0.0.1:9/v1/chat/completions")
    env.close()
