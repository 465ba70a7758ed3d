"""Policy backends: the local transformers policy and the OpenAI-compatible HTTP client."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest

import gem_core.rl as rl
from gem_core.rl.policies import OpenAIChatPolicy
from gem_core.rl.rollout import ChatPolicy, ChatResult, ContextLengthExceeded, run_chat_episode
from gem_core.rl.testing import TextPolicy
from gem_core.testing.openai_server import FakeOpenAIServer

torch = pytest.importorskip("torch", reason="policy backend tests need gem-core[rl] (torch)")


@pytest.fixture(scope="module")
def policy(tiny_model):
    model, tokenizer = tiny_model
    return rl.TransformersPolicy(model, tokenizer)


PROMPTS = [[1, 40, 41, 42, 2, 1], [1, 50, 51, 52, 53, 54, 55, 56, 2, 1, 99], [1, 7]]


def test_logprobs_match_a_full_forward_pass(policy, tiny_model):
    model, _ = tiny_model
    params = [
        rl.SamplingParams(temperature=1.0, max_new_tokens=5, seed=s) for s in range(len(PROMPTS))
    ]
    results = policy.generate_batch(PROMPTS, params)
    for prompt, res in zip(PROMPTS, results, strict=True):
        assert len(res.token_ids) == len(res.logprobs) == 5 and res.finish_reason == "length"
        ids = torch.tensor([prompt + res.token_ids])
        with torch.no_grad():
            full = rl.sequence_logprobs(model, ids)[0, len(prompt) :]
        np.testing.assert_allclose(res.logprobs, full.numpy(), atol=1e-4)


def test_greedy_is_batch_invariant_and_seeded_sampling_reproducible(policy):
    greedy = rl.SamplingParams(temperature=0.0, max_new_tokens=6)
    batched = policy.generate_batch(PROMPTS, [greedy] * len(PROMPTS))
    single = [policy.generate_batch([p], [greedy])[0] for p in PROMPTS]
    assert [r.token_ids for r in batched] == [r.token_ids for r in single]
    for a, b in zip(batched, single, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)

    def sample(seed, top_p=1.0):
        return policy.generate_batch(
            [PROMPTS[1]], [rl.SamplingParams(max_new_tokens=8, seed=seed, top_p=top_p)]
        )[0]

    assert sample(1).token_ids == sample(1).token_ids
    assert sample(1).token_ids != sample(2).token_ids
    # A tiny nucleus keeps only the most likely token: greedy.
    assert (
        sample(3, top_p=1e-6).token_ids
        == policy.generate_batch(
            [PROMPTS[1]], [rl.SamplingParams(temperature=0, max_new_tokens=8)]
        )[0].token_ids
    )


def test_stop_tokens_end_the_response(policy):
    greedy = rl.SamplingParams(temperature=0.0, max_new_tokens=6)
    first = policy.generate_batch([PROMPTS[0]], [greedy])[0].token_ids
    res = policy.generate_batch([PROMPTS[0]], [greedy.replace(stop_token_ids=(first[1],))])[0]
    assert res.token_ids == first[:2] and res.finish_reason == "stop"


def test_async_generate_batches_concurrent_requests(policy):
    greedy = rl.SamplingParams(temperature=0.0, max_new_tokens=3)

    async def main():
        return await asyncio.gather(*(policy.generate(p, greedy) for p in PROMPTS * 3))

    before = policy.num_batches
    results = asyncio.run(main())
    assert policy.num_batches - before < len(results)
    expected = policy.generate_batch(PROMPTS, [greedy] * 3)
    assert [r.token_ids for r in results] == [r.token_ids for r in expected] * 3


def test_prompt_longer_than_the_model_fails_alone(policy):
    sampling = rl.SamplingParams(temperature=0, max_new_tokens=4)
    with pytest.raises(rl.PolicyError, match="exceeds the model's 4096 positions"):
        policy.generate_batch([[1] * 4095], [sampling])

    async def main():
        return await asyncio.gather(
            policy.generate(PROMPTS[0], sampling),
            policy.generate([1] * 4095, sampling),
            return_exceptions=True,
        )

    ok, bad = asyncio.run(main())
    assert isinstance(bad, rl.PolicyError) and len(ok.token_ids) == 4


# --- OpenAI-compatible server -------------------------------------------------------------


@pytest.fixture
def server(policy):
    with FakeOpenAIServer(policy) as srv:
        yield srv


def client(server, **kwargs):
    kwargs.setdefault("backoff_s", 0.01)
    return rl.OpenAIPolicy(server.base_url, "tiny", **kwargs)


SAMPLING = rl.SamplingParams(temperature=1.0, max_new_tokens=5, seed=7)


def test_http_policy_returns_the_servers_tokens(server, policy):
    expected = policy.generate_batch([PROMPTS[1]], [SAMPLING])[0]
    got = asyncio.run(client(server).generate(PROMPTS[1], SAMPLING))
    assert got.token_ids == expected.token_ids and got.finish_reason == "length"
    np.testing.assert_allclose(got.logprobs, expected.logprobs, atol=1e-6)
    body = server.requests[-1]
    assert body["prompt"] == PROMPTS[1] and body["seed"] == 7 and body["logprobs"] == 1
    assert body["return_token_ids"] and body["return_tokens_as_token_ids"]
    # Token ids from logprobs.tokens ("token_id:N") when choices[0].token_ids is absent.
    server.script = ["tokens"]
    assert client(server).generate_sync(PROMPTS[1], SAMPLING).token_ids == expected.token_ids


def test_http_policy_retries_transient_errors(server):
    server.script = ["http500", "http503"]
    res = client(server, max_retries=2).generate_sync(PROMPTS[0], SAMPLING)
    assert len(res.token_ids) == 5 and len(server.requests) == 3


@pytest.mark.parametrize(
    ("script", "retries", "message", "attempts"),
    [
        (["http500"] * 3, 2, r"HTTP 500 from .* gave up after 3 attempts", 3),
        (["http400"], 3, r"HTTP 400 from .*scripted", 1),
        (["badjson"], 3, r"malformed response .* invalid JSON", 1),
        (["noids"], 3, r"malformed response .* 'a' is not 'token_id:N'", 1),
        (["hang", "hang"], 1, r"timed out .* gave up after 2 attempts", 2),
    ],
)
def test_http_policy_errors(server, script, retries, message, attempts):
    server.script = list(script)
    with pytest.raises(rl.PolicyError, match=message):
        client(server, max_retries=retries, timeout=0.3).generate_sync(PROMPTS[0], SAMPLING)
    assert len(server.requests) == attempts


def test_http_failures_flag_only_their_episodes(server, tiny_model):
    _, tokenizer = tiny_model
    formatter = rl.ChatFormatter(tokenizer, max_context=2048)
    http = client(server, max_retries=0, timeout=0.5)
    # Serialize requests so the script applies in order: episode i makes request i.
    server.script = ["ok", "http500", "ok", "badjson"]
    episodes = rl.collect_episodes_sync(
        "game:GuessTheNumber-v0-easy",
        http,
        formatter,
        seeds=[0, 1, 2, 3],
        concurrency=1,
        sampling=SAMPLING,
        max_turns=1,
    )
    assert [ep.error is None for ep in episodes] == [True, False, True, False]
    assert "HTTP 500" in episodes[1].error and "invalid JSON" in episodes[3].error
    assert all(ep.num_turns == 1 for ep in (episodes[0], episodes[2]))
    # Not confused with the scripted text policy: the HTTP one satisfies the Policy protocol too.
    assert isinstance(http, rl.Policy) and isinstance(TextPolicy(tokenizer, str), rl.Policy)


# --- OpenAI-compatible chat endpoint (text level) -------------------------------------------


@pytest.fixture
def chat_server():
    with FakeOpenAIServer(chat_reply=lambda messages: "\\boxed{5}", chat_usage=(11, 3)) as srv:
        yield srv


def chat_client(server, **kwargs):
    kwargs.setdefault("backoff_s", 0.01)
    return OpenAIChatPolicy(server.base_url, "chatty", **kwargs)


MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Guess."}]


def test_chat_client_sends_messages_and_reads_text_and_usage(chat_server):
    http = chat_client(chat_server, api_key="k3y", extra_body={"top_k": 20, "n": None})
    assert isinstance(http, ChatPolicy) and not isinstance(http, rl.Policy)
    got = asyncio.run(http.chat(MESSAGES, SAMPLING))
    assert got == ChatResult("\\boxed{5}", "stop", 11, 3)
    body = chat_server.requests[-1]
    assert body["messages"] == MESSAGES and body["model"] == "chatty"
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        5,
        1.0,
        1.0,
        7,
    )
    assert body["top_k"] == 20 and "n" not in body and body["stream"] is False
    assert "prompt" not in body and "logprobs" not in body and "stop_token_ids" not in body
    assert chat_server.headers[-1]["Authorization"] == "Bearer k3y"


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"choices": [{"message": {"content": None}, "finish_reason": "stop"}]}, ("", "stop")),
        (
            {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]},
            ("ab", "stop"),
        ),
        ({"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]}, ("x", "length")),
        (
            {"choices": [{"message": {"content": "x"}, "finish_reason": "tool_calls"}]},
            ("x", "stop"),
        ),
    ],
)
def test_chat_client_parses_content_shapes(payload, expected):
    res = OpenAIChatPolicy("http://127.0.0.1:9/v1", "m").parse_response(json.dumps(payload))
    assert (res.text, res.finish_reason) == expected
    assert res.prompt_tokens is None and res.completion_tokens is None


def test_chat_client_ignores_malformed_usage():
    raw = {
        "choices": [{"message": {"content": "x"}}],
        "usage": {"prompt_tokens": "12", "completion_tokens": -1},
    }
    res = OpenAIChatPolicy("http://127.0.0.1:9/v1", "m").parse_response(json.dumps(raw))
    assert res == ChatResult("x", "stop", None, None)


def test_chat_client_retries_transient_errors(chat_server):
    chat_server.script = ["http500", "http429"]
    res = chat_client(chat_server, max_retries=2).chat_sync(MESSAGES, SAMPLING)
    assert res.text == "\\boxed{5}" and len(chat_server.requests) == 3


@pytest.mark.parametrize(
    ("script", "retries", "message", "attempts"),
    [
        (["http503"] * 2, 1, r"HTTP 503 from .*/chat/completions.* gave up after 2 attempts", 2),
        (["http401"], 3, r"HTTP 401 from .*/v1/chat/completions: .*scripted", 1),
        (["badjson"], 3, r"malformed response .* invalid JSON", 1),
        (['raw:{"choices": []}'], 3, r"malformed response .* no choices\[0\]", 1),
        (['raw:{"choices": [{"text": "hi"}]}'], 3, r"expected choices\[0\]\.message", 1),
        (['raw:{"choices": [{"message": {"content": 3}}]}'], 3, r"content is int", 1),
        (["hang", "hang"], 1, r"timed out .* gave up after 2 attempts", 2),
    ],
)
def test_chat_client_errors(chat_server, script, retries, message, attempts):
    chat_server.script = list(script)
    with pytest.raises(rl.PolicyError, match=message):
        chat_client(chat_server, max_retries=retries, timeout=0.3).chat_sync(MESSAGES, SAMPLING)
    assert len(chat_server.requests) == attempts


def test_a_connection_dropped_mid_answer_is_retried(chat_server):
    chat_server.script = ["cut"]
    res = chat_client(chat_server, max_retries=1).chat_sync(MESSAGES, SAMPLING)
    assert res.text == "\\boxed{5}" and len(chat_server.requests) == 2
    chat_server.script = ["cut"]
    with pytest.raises(rl.PolicyError, match=r"failed \(IncompleteRead: .*gave up after 1 attempts"):
        chat_client(chat_server, max_retries=0).chat_sync(MESSAGES, SAMPLING)


@pytest.mark.timeout(30)
def test_timeout_bounds_an_answer_that_trickles_in(chat_server):
    # Each byte arrives well within the socket timeout; the whole answer would take ~5 s.
    chat_server.script = ["trickle", "trickle"]
    start = time.monotonic()
    with pytest.raises(rl.PolicyError, match=r"timed out \(TimeoutError: the response was still "
                       r"arriving after 0.3 s.*gave up after 2 attempts"):
        chat_client(chat_server, max_retries=1, timeout=0.3).chat_sync(MESSAGES, SAMPLING)
    assert time.monotonic() - start < 5.0  # quiet: 0.63 s; unbounded, the two attempts take ~10 s


@pytest.mark.parametrize("mode", ["raw", "nolength"])
def test_a_huge_answer_is_refused_not_read_into_memory(chat_server, mode):
    pad = json.dumps({"choices": [{"message": {"content": "x"}}], "pad": " " * 5000})
    chat_server.script = ["raw:" + pad if mode == "raw" else "nolength"]
    http = chat_client(chat_server, max_retries=3)
    http.max_response_bytes = 1000
    with pytest.raises(rl.PolicyError, match=r"the body is larger than 1000 bytes \(max_response_bytes\)"):
        http.chat_sync(MESSAGES, SAMPLING)
    assert len(chat_server.requests) == 1  # not retried: the same request gets the same answer
    assert OpenAIChatPolicy("http://127.0.0.1:9/v1", "m").max_response_bytes == 64 << 20


@pytest.mark.timeout(30)
def test_backoff_is_capped(chat_server):
    chat_server.script = ["http503"] * 3
    http = chat_client(chat_server, max_retries=3, backoff_s=60.0)
    http.max_backoff_s = 0.05  # uncapped, the waits would be 60 + 120 + 240 s
    start = time.monotonic()
    assert http.chat_sync(MESSAGES, SAMPLING).text == "\\boxed{5}"
    assert time.monotonic() - start < 5.0 and len(chat_server.requests) == 4


@pytest.mark.timeout(30)
def test_close_stops_the_retries_of_a_request_in_flight(chat_server):
    chat_server.script = ["http503"] * 100
    http = chat_client(chat_server, max_retries=100, backoff_s=0.1)
    errors: list[BaseException] = []

    def call():
        try:
            http.chat_sync(MESSAGES, SAMPLING)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    time.sleep(0.3)
    http.close()
    t.join(2.0)
    assert not t.is_alive(), "close() must end the retries of a request in flight"
    assert len(errors) == 1 and isinstance(errors[0], rl.PolicyError)
    assert "abandoned: the client was closed (last failure: HTTP 503" in str(errors[0])
    assert len(chat_server.requests) < 10


def test_context_length_answers_are_recognized(chat_server):
    chat_server.script = ["context"]
    with pytest.raises(ContextLengthExceeded, match=r"HTTP 400 .*maximum context length is 512"):
        chat_client(chat_server, max_retries=3).chat_sync(MESSAGES, SAMPLING)
    assert len(chat_server.requests) == 1  # not retried
    assert issubclass(ContextLengthExceeded, rl.PolicyError)


def test_run_chat_episode_plays_the_env_over_http(chat_server):
    import gem_core

    def reply(messages):
        users = [m for m in messages if m["role"] == "user"]
        return "\\boxed{" + str(len(users)) + "}"  # guesses 1, 2, 3, ...

    chat_server.chat_reply = reply
    env = gem_core.make("game:GuessTheNumber-v0-easy")
    ep = asyncio.run(
        run_chat_episode(
            env,
            chat_client(chat_server),
            seed=0,
            max_turns=3,
            sampling=SAMPLING,
            system_prompt="Be brief.",
        )
    )
    assert ep.error is None and ep.num_turns >= 1
    assert [t.action for t in ep.turns] == [f"\\boxed{{{i + 1}}}" for i in range(ep.num_turns)]
    assert all(t.prompt_ids == t.response_ids == t.response_logprobs == [] for t in ep.turns)
    assert ep.stats["requests"] == ep.num_turns
    assert ep.stats["prompt_tokens"] == 11 * ep.num_turns
    assert ep.stats["generated_tokens"] == 3 * ep.num_turns
    last = chat_server.requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in last if m["role"] == "assistant"] == [
        t.action for t in ep.turns[:-1]
    ]
    assert [m["content"] for m in last if m["role"] == "user"] == [t.observation for t in ep.turns]
    # Per-turn sampling seeds, derived like run_episode's.
    seeds = [b["seed"] for b in chat_server.requests]
    assert seeds == [rl.derive_seed(7, t) for t in range(ep.num_turns)]
    env.close()


def test_run_chat_episode_flags_failures_without_raising(chat_server):
    import gem_core

    env = gem_core.make("game:GuessTheNumber-v0-easy")

    class Broken:
        def __init__(self, result=None, delay=0.0):
            self.result, self.delay = result, delay

        async def chat(self, messages, sampling):
            await asyncio.sleep(self.delay)
            return self.result

    def play(policy, **kw):
        return asyncio.run(run_chat_episode(env, policy, seed=1, max_turns=2, **kw))

    ep = play(Broken("not a ChatResult"))
    assert ep.end_reason == "error" and "must return a ChatResult, got str" in ep.error
    ep = play(Broken(ChatResult("x", "eos")))
    assert "finish_reason must be one of ('stop', 'length'), got 'eos'" in ep.error
    ep = play(Broken(ChatResult("x", "stop")), generation_timeout=1.0)  # answers at once
    assert ep.error is None
    ep = play(Broken(ChatResult("x", "stop"), delay=1.0), generation_timeout=0.05)
    assert ep.error == "policy: PolicyError: chat() timed out after 0.05 s"
    # A truncated reply is flagged; under "penalize" it ends the episode with the penalty.
    ep = play(Broken(ChatResult("\\boxed{1", "length")), truncated_response="penalize")
    assert ep.end_reason == "response_truncated" and ep.turns[0].reward == -1.0
    assert ep.turns[0].response_truncated
    # An HTTP failure mid-episode is flagged on the episode.
    chat_server.chat_reply = lambda messages: "\\boxed{11}"  # out of range: the game goes on
    chat_server.script = ["ok", "http400"]
    ep = play(chat_client(chat_server, max_retries=0))
    assert ep.num_turns == 1 and ep.end_reason == "error" and "HTTP 400" in ep.error
    env.close()
