"""Policy backends: the local transformers policy and the OpenAI-compatible HTTP client."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import gem_core.rl as rl
from gem_core.rl.testing import TextPolicy

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


class FakeServer:
    """A local /v1/completions server: answers with the tiny model, or as scripted."""

    def __init__(self, policy: rl.TransformersPolicy):
        self.policy = policy
        self.script: list[str] = []  # one behaviour per request; "ok" when empty
        self.requests: list[dict] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                mode = server.script.pop(0) if server.script else "ok"
                if mode == "hang":
                    server.release.wait(5)
                    return
                if mode.startswith("http"):
                    return self.reply(int(mode[4:]), b'{"error": "scripted"}')
                if mode == "badjson":
                    return self.reply(200, b"{not json")
                sampling = rl.SamplingParams(
                    temperature=body["temperature"],
                    top_p=body["top_p"],
                    max_new_tokens=body["max_tokens"],
                    seed=body.get("seed"),
                )
                res = server.policy.generate_batch([body["prompt"]], [sampling])[0]
                logprobs = {
                    "token_logprobs": res.logprobs,
                    "tokens": [f"token_id:{t}" for t in res.token_ids],
                }
                choice = {
                    "index": 0,
                    "text": "",
                    "logprobs": logprobs,
                    "finish_reason": res.finish_reason,
                }
                if mode == "ok":
                    choice["token_ids"] = res.token_ids
                elif mode == "noids":
                    logprobs["tokens"] = ["a"] * len(res.token_ids)
                self.reply(
                    200,
                    json.dumps(
                        {"id": "x", "object": "text_completion", "choices": [choice]}
                    ).encode(),
                )

            def reply(self, code, payload):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(policy):
    srv = FakeServer(policy)
    yield srv
    srv.close()


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
