"""Policy backends: a local transformers model and OpenAI-compatible completions and chat servers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import logging
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from gem_core.errors import DependencyNotInstalled, InvalidArgument
from gem_core.rl.rollout import (
    FINISH_REASONS,
    ChatResult,
    ContextLengthExceeded,
    GenerationResult,
    PolicyError,
    SamplingParams,
)

__all__ = ["TransformersPolicy", "OpenAIPolicy", "OpenAIChatPolicy", "sequence_logprobs"]

logger = logging.getLogger(__name__)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise DependencyNotInstalled(
            "torch", extra="rl", purpose="local transformers policies"
        ) from None
    return torch


def sequence_logprobs(
    model: Any, input_ids: Any, attention_mask: Any | None = None, *, temperature: float = 1.0
) -> Any:
    """Per-token log-probabilities of ``input_ids`` under ``model``, aligned with them.

    Entry ``[i, t]`` is ``log p(input_ids[i, t] | input_ids[i, :t])`` for ``t >= 1`` and
    0 at ``t = 0``: multiply by `TrainingBatch.loss_mask` directly. Gradients flow
    (call it under ``torch.no_grad()`` for old/reference log-probabilities).

    Args:
        model: a causal LM (``model(input_ids, attention_mask=...).logits``).
        input_ids: ``[N, L]`` long tensor (right-padded).
        attention_mask: ``[N, L]`` tensor, 1 on real tokens (``None``: all ones).
        temperature: divide the logits by it first (match the sampling temperature).

    Returns:
        ``[N, L]`` float32 tensor.
    """
    torch = _torch()
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(picked, (1, 0), value=0.0)


class _LoopState:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.pending: list[tuple[list[int], SamplingParams, asyncio.Future]] = []
        self.worker: asyncio.Task | None = None
        self.full = asyncio.Event()


class TransformersPolicy:
    """A local Hugging Face causal LM as a `Policy` (CPU or GPU).

    Concurrent ``generate`` calls are gathered into batches (up to ``max_batch_size``;
    the batcher waits ``batch_wait_s`` for more requests once the first arrives) and
    decoded together with a KV cache, left-padded, in a worker thread, so the event loop
    stays free. Each request keeps its own sampling parameters: greedy when
    ``temperature == 0``; otherwise temperature and top-p sampling from a
    ``torch.Generator`` seeded with ``sampling.seed`` (unseeded: the global torch RNG).
    Greedy results are the same whatever the batch; seeded sampling is reproducible for
    the same batch composition (float rounding differs slightly across batch shapes;
    use ``max_batch_size=1`` for exact batch invariance).

    Returned log-probabilities are those of the model at temperature 1 (the raw
    distribution, like vLLM's default), whatever the sampling temperature.

    The policy holds a reference to ``model``: a training loop that updates the model
    in place samples from the updated weights on the next call (decoding switches the
    model to eval mode and restores its mode afterwards).

    Args:
        model: a causal LM, or a path / hub id for ``AutoModelForCausalLM.from_pretrained``.
        tokenizer: its tokenizer (or a path); gives the EOS and padding ids. Default: the
            model path's tokenizer, when ``model`` is a path.
        device: torch device for the model.
        max_batch_size: the most requests decoded together.
        batch_wait_s: how long the batcher waits for more requests.
        stop_token_ids: ids that end a response (default: the EOS ids of the model's
            generation config and of the tokenizer).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any | None = None,
        *,
        device: str = "cpu",
        max_batch_size: int = 32,
        batch_wait_s: float = 0.002,
        stop_token_ids: Sequence[int] | None = None,
    ):
        torch = _torch()
        try:
            import transformers
        except ImportError:
            raise DependencyNotInstalled(
                "transformers", extra="rl", purpose="local transformers policies"
            ) from None
        if isinstance(model, (str, os.PathLike)):
            path = model
            model = transformers.AutoModelForCausalLM.from_pretrained(path)
            if tokenizer is None:
                tokenizer = path
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer)
        if (
            isinstance(max_batch_size, bool)
            or not isinstance(max_batch_size, int)
            or max_batch_size < 1
        ):
            raise InvalidArgument(f"max_batch_size must be a positive int, got {max_batch_size!r}")
        self.torch = torch
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_wait_s = float(batch_wait_s)
        if stop_token_ids is None:
            ids: list[int] = []
            gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            for source in (
                gen_eos,
                getattr(tokenizer, "eos_token_id", None),
                getattr(model.config, "eos_token_id", None),
            ):
                if source is None:
                    continue
                for t in source if isinstance(source, (list, tuple)) else [source]:
                    if int(t) not in ids:
                        ids.append(int(t))
            stop_token_ids = ids
        self.stop_token_ids = tuple(int(t) for t in stop_token_ids)
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(model.config, "pad_token_id", None)
        if pad is None:
            pad = self.stop_token_ids[0] if self.stop_token_ids else 0
        self.pad_token_id = int(pad)
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="gem-policy"
        )
        self._state: _LoopState | None = None
        self.num_batches = 0

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerationResult:
        """Generate one response (batched with other concurrent calls)."""
        self._validate(prompt_ids, sampling)  # a bad request fails alone, not its batch
        loop = asyncio.get_running_loop()
        state = self._state
        if state is None or state.loop is not loop:
            state = self._state = _LoopState(loop)
        fut: asyncio.Future = loop.create_future()
        state.pending.append((list(prompt_ids), sampling, fut))
        if len(state.pending) >= self.max_batch_size:
            state.full.set()
        if state.worker is None or state.worker.done():
            state.worker = loop.create_task(self._drain(state))
        return await fut

    async def _drain(self, state: _LoopState) -> None:
        loop = state.loop
        while state.pending:
            if len(state.pending) < self.max_batch_size and self.batch_wait_s > 0:
                try:
                    await asyncio.wait_for(state.full.wait(), self.batch_wait_s)
                except asyncio.TimeoutError:
                    pass
            state.full.clear()
            batch = [b for b in state.pending[: self.max_batch_size] if not b[2].done()]
            del state.pending[: self.max_batch_size]
            if len(state.pending) >= self.max_batch_size:
                state.full.set()
            if not batch:
                continue
            try:
                results = await loop.run_in_executor(
                    self._executor,
                    self.generate_batch,
                    [b[0] for b in batch],
                    [b[1] for b in batch],
                )
            except Exception as exc:
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, _, fut), result in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(result)

    def generate_batch(
        self, prompts: Sequence[Sequence[int]], samplings: Sequence[SamplingParams]
    ) -> list[GenerationResult]:
        """Decode several prompts together (synchronous; the core of `generate`)."""
        torch = self.torch
        if len(prompts) != len(samplings):
            raise InvalidArgument(
                f"got {len(prompts)} prompts and {len(samplings)} sampling params"
            )
        if not prompts:
            return []
        for p, s in zip(prompts, samplings, strict=True):
            self._validate(p, s)
        self.num_batches += 1
        n = len(prompts)
        width = max(len(p) for p in prompts)
        ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        generators = []
        for s in samplings:
            g = None
            if not s.greedy and s.seed is not None:
                g = torch.Generator(device=self.device)
                g.manual_seed(s.seed)
            generators.append(g)
        stops = [set(self.stop_token_ids) | set(s.stop_token_ids) for s in samplings]
        tokens: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        reasons: list[str | None] = [None] * n
        steps = max(s.max_new_tokens for s in samplings)
        ids, mask, positions = ids.to(self.device), mask.to(self.device), positions.to(self.device)
        past = None
        cur_ids, cur_pos = ids, positions
        was_training = self.model.training
        self.model.eval()  # no dropout while sampling, even mid-training
        try:
            with torch.inference_mode():
                for _ in range(steps):
                    out = self.model(
                        input_ids=cur_ids,
                        attention_mask=mask,
                        position_ids=cur_pos,
                        past_key_values=past,
                        use_cache=True,
                    )
                    past = out.past_key_values
                    logits = out.logits[:, -1, :].float()
                    logp = torch.log_softmax(logits, dim=-1)
                    nxt: list[int] = []
                    for i in range(n):
                        if reasons[i] is not None:
                            nxt.append(self.pad_token_id)
                            continue
                        tok = self._choose(logits[i], samplings[i], generators[i])
                        tokens[i].append(tok)
                        logprobs[i].append(float(logp[i, tok]))
                        if tok in stops[i]:
                            reasons[i] = "stop"
                        elif len(tokens[i]) >= samplings[i].max_new_tokens:
                            reasons[i] = "length"
                        nxt.append(tok)
                    if all(r is not None for r in reasons):
                        break
                    cur_ids = torch.tensor(nxt, dtype=torch.long, device=self.device).unsqueeze(-1)
                    mask = torch.cat(
                        [mask, torch.ones((n, 1), dtype=mask.dtype, device=self.device)], dim=1
                    )
                    cur_pos = cur_pos[:, -1:] + 1
        finally:
            self.model.train(was_training)
        return [GenerationResult(tokens[i], logprobs[i], reasons[i] or "length") for i in range(n)]

    def _validate(self, prompt: Sequence[int], sampling: SamplingParams) -> None:
        if not prompt:
            raise PolicyError("empty prompt: a policy needs at least one prompt token")
        if (
            self.max_positions is not None
            and len(prompt) + sampling.max_new_tokens > self.max_positions
        ):
            raise PolicyError(
                f"prompt ({len(prompt)} tokens) + max_new_tokens ({sampling.max_new_tokens}) "
                f"exceeds the model's {self.max_positions} positions"
            )

    def _choose(self, logits: Any, sampling: SamplingParams, generator: Any) -> int:
        torch = self.torch
        if sampling.greedy:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / sampling.temperature, dim=-1)
        if sampling.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            cum = torch.cumsum(sorted_p, dim=-1)
            drop = (cum - sorted_p) >= sampling.top_p  # keep the smallest prefix reaching top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        return int(torch.multinomial(probs, 1, generator=generator))

    def close(self) -> None:
        """Stop the worker thread (the model stays usable through `generate_batch`)."""
        self._executor.shutdown(wait=False)


_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

# How servers word "the prompt does not fit the context" in a 4xx body: vLLM and OpenAI
# ("maximum context length is N tokens", code "context_length_exceeded"), SGLang ("longer
# than the model's context length"), others ("context window", "prompt is too long").
_CONTEXT_ERROR = re.compile(
    r"context[ _]length|context[ _]window|prompt is too long", re.IGNORECASE
)


class _HTTPClient:
    """What the OpenAI-compatible clients share: the POST with retries, timeouts and JSON checks."""

    #: The largest response body accepted (bytes); a larger one fails the request
    #: (`PolicyError`, not retried) instead of filling memory.
    max_response_bytes: int = 64 << 20
    #: The longest wait between two attempts (seconds): backoff doubles up to it.
    max_backoff_s: float = 30.0
    #: The endpoint under ``base_url`` (set by each client).
    route: str = ""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_connections: int = 64,
        extra_body: dict[str, Any] | None = None,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise InvalidArgument(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_retries < 0:
            raise InvalidArgument(f"max_retries must be >= 0, got {max_retries!r}")
        self.url = base_url.rstrip("/") + self.route
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.extra_body = dict(extra_body or {})
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_connections, thread_name_prefix="gem-http"
        )
        self._rng = random.Random(0)
        self._rng_lock = threading.Lock()
        self._closed = threading.Event()

    def _post(self, body: dict[str, Any]) -> bytes:
        """POST ``body`` as JSON; retry transient failures; return the raw response body.

        Raises:
            ContextLengthExceeded: a 4xx answer saying the request does not fit the context.
            PolicyError: any other non-transient failure, or retries exhausted.
        """
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._rng_lock:
                    jitter = 1.0 + 0.25 * self._rng.random()
                delay = min(self.backoff_s * (2 ** (attempt - 1)), self.max_backoff_s) * jitter
                self._closed.wait(delay)  # close() cuts the wait short
            if self._closed.is_set():
                raise PolicyError(
                    f"request to {self.url} abandoned: the client was closed"
                    + (f" (last failure: {last})" if last else "")
                )
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            deadline = time.monotonic() + self.timeout
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return self._read_body(resp, deadline)
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                last = f"HTTP {exc.code} from {self.url}: {detail}"
                if exc.code in _TRANSIENT_STATUS:
                    logger.info("transient failure (attempt %d): %s", attempt + 1, last)
                    continue
                if 400 <= exc.code < 500 and _CONTEXT_ERROR.search(detail):
                    raise ContextLengthExceeded(last) from None
                raise PolicyError(last) from None
            except (
                urllib.error.URLError,
                TimeoutError,
                ConnectionError,
                OSError,
                http.client.HTTPException,  # IncompleteRead: the server dropped the connection mid-body
            ) as exc:
                reason = getattr(exc, "reason", exc)
                kind = (
                    "timed out" if isinstance(reason, (TimeoutError, socket.timeout)) else "failed"
                )
                last = f"request to {self.url} {kind} ({type(reason).__name__}: {reason}; timeout={self.timeout} s)"
                logger.info("transient failure (attempt %d): %s", attempt + 1, last)
                continue
        raise PolicyError(f"{last} — gave up after {self.max_retries + 1} attempts")

    def _read_body(self, resp: Any, deadline: float) -> bytes:
        """The body of ``resp``, read by chunks: at most `max_response_bytes`, and by
        ``deadline`` (``timeout`` bounds the whole request, also against a server that
        trickles its answer a byte at a time)."""
        limit = self.max_response_bytes
        too_big = (
            f"malformed response from {self.url}: the body is larger than {limit} bytes "
            "(max_response_bytes); is this an OpenAI-compatible endpoint?"
        )
        length = resp.headers.get("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > limit:
            raise PolicyError(too_big)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = resp.read1(1 << 16)
            if not chunk:
                missing = getattr(resp, "length", None)  # bytes of Content-Length still due
                if missing:
                    raise http.client.IncompleteRead(b"".join(chunks), missing)
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise PolicyError(too_big)
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the response was still arriving after {self.timeout} s")

    def _first_choice(self, raw: bytes | str) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(payload, choices[0])`` of a response body; `PolicyError` when it is not that."""
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            shown = raw[:200] if isinstance(raw, str) else raw[:200].decode(errors="replace")
            raise PolicyError(
                f"malformed response from {self.url}: invalid JSON ({exc}): {shown!r}"
            ) from None
        try:
            choice = payload["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise PolicyError(
                f"malformed response from {self.url}: no choices[0] in {str(payload)[:200]!r}"
            ) from None
        if not isinstance(choice, dict):
            raise PolicyError(
                f"malformed response from {self.url}: choices[0] is {type(choice).__name__}"
            )
        return payload, choice

    def close(self) -> None:
        """Release the thread pool; requests in flight make no further attempts."""
        self._closed.set()
        self._executor.shutdown(wait=False)


class OpenAIPolicy(_HTTPClient):
    """An OpenAI-compatible ``/v1/completions`` server (vLLM, SGLang) as a `Policy`.

    Sends the prompt as token ids (``"prompt": [ids]``) and asks for the sampled
    tokens' log-probabilities (``logprobs``) and their ids: ``return_token_ids`` (vLLM
    >= 0.10.2 answers ``choices[0].token_ids``) and ``return_tokens_as_token_ids``
    (tokens come back as ``"token_id:N"`` strings). The response's token ids are used
    as they are — never re-tokenized; a response without token ids is malformed.
    Uses only the standard library; blocking calls run in a thread pool of
    ``max_connections`` threads.

    Transient failures — connection errors (also a connection dropped in the middle of
    the answer), timeouts and HTTP 408/409/425/429/500/502/503/504 — are retried up to
    ``max_retries`` times with exponential backoff (capped at `max_backoff_s`); then,
    and for any other failure (other HTTP errors, invalid JSON, a response of the wrong
    shape, a body over `max_response_bytes`), a `PolicyError` is raised, which
    `run_episode` turns into a flagged episode. After `close`, requests in flight make
    no further attempts.

    Args:
        base_url: the server's API root, e.g. ``"http://127.0.0.1:8000/v1"``.
        model: the served model name.
        api_key: sent as ``Authorization: Bearer ...`` (default ``$OPENAI_API_KEY``,
            if set).
        timeout: seconds for one HTTP request (one attempt), reading the answer included.
        max_retries: retries after the first attempt for transient failures.
        backoff_s: first retry delay (doubles each retry up to `max_backoff_s`, with jitter).
        max_connections: concurrent requests.
        extra_body: extra JSON fields for every request (e.g. ``{"top_k": 20}``).
    """

    route = "/completions"

    def request_body(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> dict[str, Any]:
        """The JSON body sent for one request."""
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [int(t) for t in prompt_ids],
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "logprobs": 1,
            "echo": False,
            "n": 1,
            "stream": False,
            "skip_special_tokens": False,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop_token_ids:
            body["stop_token_ids"] = list(sampling.stop_token_ids)
        body.update(self.extra_body)
        return body

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerationResult:
        """Generate one response (one HTTP request, with retries)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.generate_sync, prompt_ids, sampling)

    def generate_sync(
        self, prompt_ids: Sequence[int], sampling: SamplingParams
    ) -> GenerationResult:
        """Blocking version of `generate`."""
        return self.parse_response(self._post(self.request_body(prompt_ids, sampling)))

    def parse_response(self, raw: bytes | str) -> GenerationResult:
        """Parse a ``/v1/completions`` response body into a `GenerationResult`."""
        _payload, choice = self._first_choice(raw)
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None and isinstance(lp, dict) and lp.get("tokens") is not None:
            ids = [_token_id(t, self.url) for t in lp["tokens"]]
        if not isinstance(ids, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in ids
        ):
            raise PolicyError(
                f"malformed response from {self.url}: no generated token ids (expected "
                "choices[0].token_ids or logprobs.tokens as 'token_id:N'; for vLLM send "
                "return_token_ids / start it with --return-tokens-as-token-ids)"
            )
        token_logprobs = lp.get("token_logprobs") if isinstance(lp, dict) else None
        if not isinstance(token_logprobs, list) or len(token_logprobs) != len(ids):
            got = len(token_logprobs) if isinstance(token_logprobs, list) else "none"
            raise PolicyError(
                f"malformed response from {self.url}: need {len(ids)} token logprobs, got {got}"
            )
        try:
            logprobs = [float(x) for x in token_logprobs]
        except (TypeError, ValueError):
            raise PolicyError(
                f"malformed response from {self.url}: non-numeric token logprobs"
            ) from None
        reason = choice.get("finish_reason")
        if reason not in FINISH_REASONS:
            raise PolicyError(
                f"malformed response from {self.url}: finish_reason {reason!r}, expected one of {FINISH_REASONS}"
            )
        return GenerationResult(list(ids), logprobs, reason)


class OpenAIChatPolicy(_HTTPClient):
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint as a `ChatPolicy` (text level).

    Sends the conversation as chat ``messages`` and gets the reply's text back: the
    server applies its own chat template, so no tokenizer is needed on this side (OpenAI
    and hosted APIs, vLLM, SGLang). Used by `run_chat_episode` and ``gem eval --api
    chat``; for training, which needs token ids and log-probabilities, use `OpenAIPolicy`.

    The reply is ``choices[0].message.content`` (a ``null`` content, e.g. a refusal or a
    tool-call-only message, reads as ``""``; a list of content parts is joined; separate
    reasoning fields such as ``reasoning_content`` are not part of it).
    ``finish_reason == "length"`` marks the reply truncated; any other value (``stop``,
    ``tool_calls``, ``content_filter``, missing) counts as a finished reply. Token counts
    come from the response's ``usage`` (``None`` when absent or malformed).

    Retries, timeouts and failures work as in `OpenAIPolicy` (same code): transient
    failures are retried ``max_retries`` times with backoff, anything else raises
    `PolicyError` (invalid JSON, no ``choices[0]``, no ``message``); a 4xx answer saying
    the prompt is too long for the model's context raises `ContextLengthExceeded`.

    Args:
        base_url: the API root, e.g. ``"http://127.0.0.1:8000/v1"`` or
            ``"https://api.openai.com/v1"``.
        model: the model name.
        api_key: sent as ``Authorization: Bearer ...`` (default ``$OPENAI_API_KEY``,
            if set).
        timeout: seconds for one HTTP request (one attempt), reading the answer included.
        max_retries: retries after the first attempt for transient failures.
        backoff_s: first retry delay (doubles each retry up to `max_backoff_s`, with jitter).
        max_connections: concurrent requests.
        extra_body: extra JSON fields for every request, overriding the defaults; a
            ``None`` value removes a field (e.g. ``{"top_k": 20}`` for vLLM, or
            ``{"max_completion_tokens": 512, "max_tokens": None}`` for OpenAI models that
            reject ``max_tokens``).

    Request fields: ``model``, ``messages``, ``max_tokens``, ``temperature``, ``top_p``,
    ``n=1``, ``stream=false``, ``seed`` (when the sampling has one) and ``stop_token_ids``
    (only when the sampling has some; a vLLM extension).
    """

    route = "/chat/completions"

    def request_body(
        self, messages: Sequence[dict[str, Any]], sampling: SamplingParams
    ) -> dict[str, Any]:
        """The JSON body sent for one request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "n": 1,
            "stream": False,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop_token_ids:
            body["stop_token_ids"] = list(sampling.stop_token_ids)
        body.update(self.extra_body)
        return {k: v for k, v in body.items() if v is not None}

    async def chat(self, messages: list[dict[str, str]], sampling: SamplingParams) -> ChatResult:
        """Answer ``messages`` (one HTTP request, with retries)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.chat_sync, messages, sampling)

    def chat_sync(self, messages: Sequence[dict[str, Any]], sampling: SamplingParams) -> ChatResult:
        """Blocking version of `chat`."""
        return self.parse_response(self._post(self.request_body(messages, sampling)))

    def parse_response(self, raw: bytes | str) -> ChatResult:
        """Parse a ``/v1/chat/completions`` response body into a `ChatResult`."""
        payload, choice = self._first_choice(raw)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise PolicyError(
                f"malformed response from {self.url}: expected choices[0].message as an "
                f"object, got {str(choice)[:200]!r} (is this a /chat/completions endpoint?)"
            )
        content = message.get("content")
        if content is None:
            text = ""
        elif isinstance(content, str):
            text = content
        elif isinstance(content, list):  # content parts
            text = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        else:
            raise PolicyError(
                f"malformed response from {self.url}: message.content is "
                f"{type(content).__name__}, expected a string"
            )
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        usage = payload.get("usage") if isinstance(payload, dict) else None
        return ChatResult(
            text, reason, _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
        )


def _count(usage: Any, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _token_id(token: Any, url: str) -> int:
    if isinstance(token, str) and token.startswith("token_id:"):
        try:
            return int(token[len("token_id:") :])
        except ValueError:
            pass
    raise PolicyError(
        f"malformed response from {url}: token {token!r} is not 'token_id:N' (start vLLM "
        "with --return-tokens-as-token-ids or send return_token_ids)"
    )


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read(300).decode(errors="replace")  # never the whole of a huge error page
    except Exception:  # pragma: no cover - best effort
        body = ""
    return body or str(exc.reason)
