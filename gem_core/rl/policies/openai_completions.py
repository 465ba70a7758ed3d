"""An OpenAI-compatible ``/v1/completions`` server (vLLM, SGLang) as a token-level `Policy`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gem_core.rl.policies.http_client import _HTTPClient
from gem_core.rl.sampling import FINISH_REASONS, GenerationResult, PolicyError, SamplingParams

__all__ = ["OpenAIPolicy"]


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
        fields = {
            "prompt": [int(t) for t in prompt_ids],
            "logprobs": 1,
            "echo": False,
            "skip_special_tokens": False,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }
        return self._body(fields, sampling)

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerationResult:
        """Generate one response (one HTTP request, with retries)."""
        return await self._in_thread(self.generate_sync, prompt_ids, sampling)

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
