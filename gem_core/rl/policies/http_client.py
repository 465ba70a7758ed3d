"""The HTTP client the OpenAI-compatible backends share: the POST with retries, timeouts and JSON checks."""

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
from collections.abc import Callable
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rl.sampling import ContextLengthExceeded, PolicyError, SamplingParams

logger = logging.getLogger(__name__)


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

    def _body(self, fields: dict[str, Any], sampling: SamplingParams) -> dict[str, Any]:
        """A request body: the model, ``fields``, the sampling fields, then `extra_body`
        (which overrides any of them)."""
        body: dict[str, Any] = {
            "model": self.model,
            **fields,
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
        return body

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` (a blocking request) in the client's thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

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


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read(300).decode(errors="replace")  # never the whole of a huge error page
    except Exception:  # pragma: no cover - best effort
        body = ""
    return body or str(exc.reason)
