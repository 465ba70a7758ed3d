"""Fixtures for the eval tests: the tiny offline model behind a local OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@pytest.fixture(scope="session")
def tiny():
    """``(policy, tokenizer_dir)``: the tiny model as a `TransformersPolicy`, and its directory."""
    torch = pytest.importorskip("torch", reason="the eval tests need gem-core[rl] (torch)")
    pytest.importorskip("transformers", reason="the eval tests need gem-core[rl] (transformers)")
    import gem_core.rl as rl
    from gem_core.rl.testing import build_tiny_model, load_tiny_model

    torch.set_num_threads(1)
    model, tokenizer = load_tiny_model()
    return rl.TransformersPolicy(model, tokenizer), str(build_tiny_model())


def message_text(message: dict) -> str:
    """The text of a chat message: its string content, or its content parts' text joined."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return " ".join(p["text"] for p in content if p.get("type") == "text")


class CompletionsServer:
    """A ``/v1/completions`` and ``/v1/chat/completions`` server on 127.0.0.1 (the tiny model).

    ``script``: one behaviour per POST, in arrival order ("ok" once it is empty):
    ``"ok"``, ``"http500"`` (any ``httpNNN``), ``"badjson"``, ``"empty"`` (a completion
    with no tokens), ``"nochoices"``, ``"hang"`` (never answers until closed); chat only:
    ``"nousage"`` (an answer without ``usage``), ``"context"`` (HTTP 400 worded like
    vLLM's context-length error), ``"nomessage"`` (a choice without ``message``).
    ``delay``: seconds to wait before answering each request.

    Chat requests are answered by applying the tokenizer's chat template to the
    messages and generating with the tiny model (the reply is the decoded text, special
    tokens skipped; ``usage`` counts the prompt and generated tokens), or, when
    ``chat_reply`` is set, with ``chat_reply(messages)`` (usage: word counts of the text;
    a message whose content is a list of parts counts its text parts).
    ``requests`` records the JSON body of each POST, ``paths`` its path, ``answers``
    each chat answer as ``(request body, response payload)``. The probe request `gem
    eval` sends before a run (``max_tokens == 1``) goes to ``probes`` instead, is not
    in ``requests``/``paths`` and takes nothing from ``script``.

    ``headers`` records every POST's headers (probes included). ``refuse``: an HTTP
    status every POST is answered with (probes included), e.g. 401 for a wrong key.
    ``token_ids``: how ``/v1/completions`` treats token-id prompts: ``"ok"``, ``"422"``
    (refused as a validation error, like a server whose prompt must be text, e.g.
    `transformers serve`), ``"404"`` (no such route) or ``"text"`` (answers text
    without token ids or logprobs, like a hosted API).
    `kill` stops the server (connections refused from then on), like a server that dies
    mid-run.
    """

    def __init__(self, policy):
        self.policy = policy
        self.script: list[str] = []
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self.answers: list[tuple[dict, dict]] = []
        self.chat_reply = None
        self.probes: list[dict] = []
        self.headers: list[dict] = []
        self.token_ids = "ok"
        self.delay = 0.0
        self.refuse: int | None = None
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.killed = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    return self.reply(200, b'{"object": "list", "data": [{"id": "tiny"}]}')
                self.reply(404, b'{"error": "not found"}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.headers.append(dict(self.headers))
                if server.refuse is not None:
                    return self.reply(server.refuse, b'{"error": "refused"}')
                is_chat = self.path.rstrip("/").endswith("/chat/completions")
                if not is_chat and isinstance(body.get("prompt"), list) and server.token_ids != "ok":
                    if server.token_ids == "404":
                        return self.reply(404, b'{"detail": "Not Found"}')
                    if server.token_ids == "422":
                        return self.reply(422, json.dumps({"detail": [{
                            "type": "string_type", "loc": ["body", "prompt"],
                            "msg": "Input should be a valid string"}]}).encode())
                    return self.reply(200, json.dumps({"object": "text_completion", "choices": [{
                        "index": 0, "text": "Hi", "finish_reason": "length", "logprobs": None}]}).encode())
                with server.lock:
                    if body.get("max_tokens") == 1:
                        server.probes.append(body)
                        mode = "ok"
                    else:
                        server.requests.append(body)
                        server.paths.append(self.path)
                        mode = server.script.pop(0) if server.script else "ok"
                if server.delay:
                    time.sleep(server.delay)
                if mode == "hang":
                    server.release.wait(30)
                    return
                if mode.startswith("http"):
                    return self.reply(int(mode[4:]), b'{"error": "scripted failure"}')
                if mode == "badjson":
                    return self.reply(200, b"{not json at all")
                if mode == "nochoices":
                    return self.reply(200, b'{"choices": []}')
                if self.path.rstrip("/").endswith("/chat/completions"):
                    return self.chat(body, mode)
                if mode == "empty":
                    ids, lps, reason = [], [], "stop"
                else:
                    import gem_core.rl as rl

                    sampling = rl.SamplingParams(
                        temperature=body["temperature"], top_p=body["top_p"],
                        max_new_tokens=body["max_tokens"], seed=body.get("seed"),
                    )
                    with server.lock:
                        res = server.policy.generate_batch([body["prompt"]], [sampling])[0]
                    ids, lps, reason = res.token_ids, res.logprobs, res.finish_reason
                choice = {
                    "index": 0, "text": "", "token_ids": ids, "finish_reason": reason,
                    "logprobs": {"token_logprobs": lps, "tokens": [f"token_id:{t}" for t in ids]},
                }
                self.reply(200, json.dumps({"object": "text_completion", "choices": [choice]}).encode())

            def chat(self, body, mode):
                if mode == "context":
                    msg = ("This model's maximum context length is 512 tokens. However, you "
                           "requested 900 tokens (400 in the messages, 500 in the completion).")
                    return self.reply(400, json.dumps({"object": "error", "message": msg}).encode())
                if mode == "nomessage":
                    return self.reply(200, b'{"choices": [{"index": 0, "text": "hi"}]}')
                if body.get("max_tokens") == 1:  # gem eval's probe
                    text, reason, usage = "OK", "length", {"prompt_tokens": 3, "completion_tokens": 1}
                elif mode == "empty":
                    text, reason, usage = "", "stop", {"prompt_tokens": 3, "completion_tokens": 0}
                elif server.chat_reply is not None:
                    text = server.chat_reply(body["messages"])
                    words = sum(len(message_text(m).split()) for m in body["messages"])
                    reason, usage = "stop", {"prompt_tokens": words, "completion_tokens": len(text.split())}
                else:
                    import gem_core.rl as rl

                    tok = server.policy.tokenizer
                    prompt = tok.apply_chat_template(body["messages"], tokenize=False,
                                                     add_generation_prompt=True)
                    ids = tok(prompt, add_special_tokens=False)["input_ids"]
                    sampling = rl.SamplingParams(
                        temperature=body["temperature"], top_p=body["top_p"],
                        max_new_tokens=body["max_tokens"], seed=body.get("seed"),
                    )
                    with server.lock:
                        res = server.policy.generate_batch([ids], [sampling])[0]
                    text = tok.decode(res.token_ids, skip_special_tokens=True)
                    reason = res.finish_reason
                    usage = {"prompt_tokens": len(ids), "completion_tokens": len(res.token_ids)}
                payload = {"object": "chat.completion", "choices": [{
                    "index": 0, "message": {"role": "assistant", "content": text},
                    "finish_reason": reason}]}
                if mode != "nousage":
                    payload["usage"] = {**usage, "total_tokens": sum(usage.values())}
                if body.get("max_tokens") == 1:
                    return self.reply(200, json.dumps(payload).encode())
                with server.lock:
                    server.answers.append((body, payload))
                self.reply(200, json.dumps(payload).encode())

            def reply(self, code, payload):
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def kill(self):
        """Stop serving: from now on connections are refused (a server that died)."""
        if not self.killed:
            self.killed = True
            self.release.set()
            self.httpd.shutdown()
            self.httpd.server_close()

    def close(self):
        self.kill()


@pytest.fixture
def server(tiny):
    srv = CompletionsServer(tiny[0])
    yield srv
    srv.close()
