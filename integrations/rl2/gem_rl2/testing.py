"""Test support: a local stand-in of the SGLang HTTP server, answered by a tiny model.

`SGLangStandIn` serves SGLang's ``POST /generate`` on ``127.0.0.1`` (an aiohttp server
in a background thread): ``{"input_ids", "sampling_params", "return_logprob"}`` in,
``{"text", "output_ids", "meta_info": {"output_token_logprobs": [[logp, id, None], ...],
"finish_reason": {"type": "stop" | "length"}, "prompt_tokens", "completion_tokens"}}``
out, as SGLang answers. The tokens come from `gem_core.rl.testing.TinyModelGenerator`
(a real transformers model: greedy, or scripted tokens scored by the model); the text
follows SGLang's rules: special tokens skipped unless ``skip_special_tokens`` is false,
the stop token trimmed unless ``no_stop_trim`` is true. It also answers the memory
endpoints RL2 calls around a rollout (``release_memory_occupation``, ...) with 200.
Everything that talks to it (RL2's ``async_generate`` / ``async_request``, its rollout
loop) is RL2's own code.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

from gem_core.rl.testing import TinyModelGenerator

__all__ = ["SGLangStandIn"]


class SGLangStandIn:
    """SGLang's ``/generate`` on ``127.0.0.1:<free port>``; use as a context manager.

    Args:
        model_path: a Hugging Face model directory (e.g. `gem_core.rl.testing.build_tiny_model`).
        script: optional ``script(tokenizer, prompt_ids) -> ids`` (scripted mode).
        default_max_new_tokens: the cap when ``sampling_params.max_new_tokens`` is absent
            or null (SGLang's default is 128).

    Attributes:
        url: ``http://127.0.0.1:<port>`` once started.
        requests: the JSON body of every ``/generate`` call.
    """

    def __init__(
        self,
        model_path: str,
        *,
        script: Callable[[Any, list[int]], list[int]] | None = None,
        default_max_new_tokens: int = 128,
    ):
        self.generator = TinyModelGenerator(model_path, script=script)
        self.default_max_new_tokens = int(default_max_new_tokens)
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Any = None

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The ``/generate`` answer to ``body`` (what the server sends)."""
        _, tokenizer = self.generator.load()
        sp = dict(body.get("sampling_params") or {})
        cap = sp.get("max_new_tokens")
        cap = self.default_max_new_tokens if cap is None else int(cap)
        prompt = [int(t) for t in body["input_ids"]]
        ids, logprobs = self.generator.complete(prompt, cap)
        eos = tokenizer.eos_token_id
        stopped = bool(ids) and ids[-1] == eos
        shown = ids[:-1] if stopped and not sp.get("no_stop_trim", False) else ids
        text = tokenizer.decode(shown, skip_special_tokens=sp.get("skip_special_tokens", True))
        meta: dict[str, Any] = {
            "finish_reason": {"type": "stop" if stopped or len(ids) < cap else "length"},
            "prompt_tokens": len(prompt),
            "completion_tokens": len(ids),
        }
        if stopped:
            meta["finish_reason"]["matched"] = int(eos)
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [[float(lp), int(t), None] for lp, t in zip(logprobs, ids, strict=True)]
        return {"text": text, "output_ids": list(ids), "meta_info": meta}

    async def _generate(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.json()
        self.requests.append(body)
        answer = await asyncio.get_running_loop().run_in_executor(None, self.answer, body)
        return web.json_response(answer)

    async def _ok(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"success": True})

    def start(self) -> SGLangStandIn:
        """Load the model, bind a free port and serve in a background thread."""
        from aiohttp import web

        self.generator.load()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        app = web.Application()
        app.router.add_post("/generate", self._generate)
        for name in ("release_memory_occupation", "resume_memory_occupation", "flush_cache"):
            app.router.add_post(f"/{name}", self._ok)
        app.router.add_get("/health", self._ok)
        app.router.add_get("/health_generate", self._ok)
        ready = threading.Event()
        failed: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._runner = web.AppRunner(app)
                loop.run_until_complete(self._runner.setup())
                loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", port).start())
            except BaseException as exc:  # reported by start()
                failed.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="sglang-stand-in", daemon=True)
        self._thread.start()
        if not ready.wait(60) or failed:
            raise RuntimeError(f"the SGLang stand-in did not start: {failed[:1]}")
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._loop = self._thread = None

    def __enter__(self) -> SGLangStandIn:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
