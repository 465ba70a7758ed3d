"""An OpenAI-compatible ``/v1/chat/completions`` endpoint as a text-level `ChatPolicy`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gem_core.rl.policies.http_client import _HTTPClient
from gem_core.rl.sampling import ChatResult, PolicyError, SamplingParams

__all__ = ["OpenAIChatPolicy"]


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
        body = self._body({"messages": [dict(m) for m in messages]}, sampling)
        return {k: v for k, v in body.items() if v is not None}

    async def chat(self, messages: list[dict[str, str]], sampling: SamplingParams) -> ChatResult:
        """Answer ``messages`` (one HTTP request, with retries)."""
        return await self._in_thread(self.chat_sync, messages, sampling)

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
