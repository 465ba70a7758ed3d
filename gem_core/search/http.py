"""The HTTP search backend: a client of Search-R1 style retrieval servers (``POST /retrieve``).

Protocol. The request body is
``{"queries": [query], "query": query, "topk": k, "return_scores": true}`` — the
``queries`` list is what Search-R1's server reads, the single ``query`` what the
reference GEM's msgpack server reads; each ignores the other key. The response is
``{"result": [[{"document": {"id": ..., "contents": "title\\ntext"}, "score": s}, ...]]}``
(one list per query), or the reference GEM's single-query form
``{"result": [{"document": ..., "score": s}, ...]}``; bare documents without
``document``/``score`` wrappers are accepted too, as are documents with ``title`` and
``text`` instead of ``contents``. Bodies are JSON, or msgpack when ``encoding="msgpack"``
(needs the ``msgpack`` or ``msgspec`` package); a response is decoded by its
``Content-Type``.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from gem_core.errors import DependencyNotInstalled, InvalidArgument
from gem_core.search.base import Passage, SearchBackendError, split_contents

__all__ = ["HTTPRetriever"]

_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_MAX_BODY = 64 * 2**20


def _msgpack() -> tuple[Any, Any] | None:
    """``(packb, unpackb)`` from ``msgpack`` or ``msgspec``, or ``None`` if neither is installed."""
    try:
        import msgpack

        return (lambda obj: msgpack.packb(obj, use_bin_type=True)), (lambda b: msgpack.unpackb(b, raw=False))
    except ImportError:
        pass
    try:
        import msgspec

        return msgspec.msgpack.encode, msgspec.msgpack.decode
    except ImportError:
        return None


class _Retryable(Exception):
    """An attempt failed in a way that another attempt may fix."""


class HTTPRetriever:
    """Search through a retrieval server (see the module docstring for the protocol).

    Each attempt is bounded by ``timeout``; connection errors, timeouts and HTTP 408, 429
    and 5xx are retried up to ``retries`` times with exponential backoff, all within
    ``total_timeout``. Thread-safe (no shared connection state).

    Args:
        url: the full endpoint, e.g. ``"http://127.0.0.1:8000/retrieve"``.
        timeout: seconds per attempt (connect + response).
        retries: extra attempts after a retryable failure.
        backoff: seconds before the first retry; doubled each retry, at most 2 s.
        total_timeout: bound on all attempts and waits together; default
            ``timeout * (retries + 1) + the backoffs``.
        encoding: ``"json"`` or ``"msgpack"`` (request body; the response may be either).
        headers: extra HTTP headers (e.g. an ``Authorization`` token).

    Raises:
        InvalidArgument: bad url, timeout or encoding.
        DependencyNotInstalled: ``encoding="msgpack"`` without ``msgpack``/``msgspec``.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        retries: int = 2,
        backoff: float = 0.25,
        total_timeout: float | None = None,
        encoding: str = "json",
        headers: dict[str, str] | None = None,
    ):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidArgument(f"search_url must be an http:// or https:// URL such as "
                                  f"'http://127.0.0.1:8000/retrieve', got {url!r}")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise InvalidArgument(f"need timeout > 0, retries >= 0, backoff >= 0; got timeout={timeout}, "
                                  f"retries={retries}, backoff={backoff}")
        if encoding not in ("json", "msgpack"):
            raise InvalidArgument(f"encoding must be 'json' or 'msgpack', got {encoding!r}")
        if encoding == "msgpack" and _msgpack() is None:
            raise DependencyNotInstalled("msgpack", purpose="msgpack requests to a retrieval server")
        self.url = url
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        waits = sum(min(2.0, self.backoff * 2**i) for i in range(self.retries))
        self.total_timeout = float(total_timeout) if total_timeout else self.timeout * (self.retries + 1) + waits
        self.encoding = encoding
        self.headers = dict(headers or {})
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failures": 0}

    # ------------------------------------------------------------------ wire

    def _encode(self, payload: dict[str, Any]) -> tuple[bytes, str]:
        if self.encoding == "msgpack":
            codec = _msgpack()
            assert codec is not None
            return codec[0](payload), "application/msgpack"
        return json.dumps(payload).encode("utf-8"), "application/json"

    @staticmethod
    def _decode(body: bytes, content_type: str) -> Any:
        if "msgpack" in content_type.lower():
            codec = _msgpack()
            if codec is None:
                raise SearchBackendError("the retrieval server answered in msgpack but neither "
                                         "'msgpack' nor 'msgspec' is installed: pip install msgpack")
            try:
                return codec[1](body)
            except Exception as e:  # noqa: BLE001 - any decoder error means a bad body
                raise SearchBackendError(f"the retrieval server sent invalid msgpack ({e})") from None
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            snippet = body[:80].decode("utf-8", "replace")
            raise SearchBackendError(f"the retrieval server sent invalid JSON ({e}); body starts {snippet!r}") from None

    def _attempt(self, data: bytes, content_type: str, timeout: float) -> Any:
        headers = {"Content-Type": content_type, "Accept": "application/json, application/msgpack",
                   **self.headers}
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(_MAX_BODY + 1)
                ctype = response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            detail = ""
            try:
                detail = e.read(300).decode("utf-8", "replace").strip()
            except Exception:  # noqa: BLE001 - the detail is best effort
                pass
            message = f"HTTP {e.code} {e.reason}" + (f": {detail}" if detail else "")
            if e.code in _RETRY_STATUS:
                raise _Retryable(message) from None
            raise SearchBackendError(f"the retrieval server at {self.url} answered {message}") from None
        except TimeoutError:
            raise _Retryable(f"no answer within {timeout:.3g} s") from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, TimeoutError):
                raise _Retryable(f"no answer within {timeout:.3g} s") from None
            raise _Retryable(f"cannot reach it ({reason})") from None
        except (ConnectionError, OSError) as e:  # reset mid-response, ...
            raise _Retryable(f"connection failed ({e})") from None
        if len(body) > _MAX_BODY:
            raise SearchBackendError(f"the retrieval server's answer exceeds {_MAX_BODY} bytes")
        return self._decode(body, ctype)

    # ------------------------------------------------------------------ parsing

    @staticmethod
    def _passage(item: Any, rank: int) -> Passage:
        if not isinstance(item, dict):
            raise SearchBackendError(f"unexpected result item {type(item).__name__}; expected an object "
                                     "with 'document' and 'score'")
        doc = item.get("document", item)
        score = item.get("score") if "document" in item else None
        if not isinstance(doc, dict):
            raise SearchBackendError(f"unexpected 'document' {type(doc).__name__}; expected an object")
        if "contents" in doc:
            title, text = split_contents(str(doc.get("contents") or ""))
        elif "text" in doc or "title" in doc:
            title, text = str(doc.get("title") or ""), str(doc.get("text") or "")
        else:
            raise SearchBackendError(f"result document has no 'contents' (or 'title'/'text'): keys {sorted(doc)[:8]}")
        doc_id = doc.get("id", doc.get("docid", doc.get("_id", rank)))
        try:
            score_f = None if score is None else float(score)
        except (TypeError, ValueError):
            score_f = None
        return Passage(str(doc_id), title, text, score_f)

    @classmethod
    def parse_response(cls, data: Any) -> list[Passage]:
        """Passages of a decoded ``/retrieve`` response for one query (both shapes).

        Raises:
            SearchBackendError: the response does not have the expected shape.
        """
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            kind = f"keys {sorted(data)[:8]}" if isinstance(data, dict) else type(data).__name__
            raise SearchBackendError(f"unexpected response from the retrieval server: expected "
                                     f"{{'result': [...]}}, got {kind}")
        result = data["result"]
        if result and isinstance(result[0], list):  # Search-R1: one list per query
            result = result[0]
        return [cls._passage(item, i) for i, item in enumerate(result)]

    # ------------------------------------------------------------------ API

    def search(self, query: str, topk: int = 3) -> list[Passage]:
        """The ``topk`` best passages for ``query`` from the server, best first.

        Raises:
            SearchBackendError: every attempt failed, or the answer is malformed (the
                message says which and how often it was tried).
        """
        payload = {"queries": [query], "query": query, "topk": int(topk), "return_scores": True}
        data, content_type = self._encode(payload)
        deadline = time.monotonic() + self.total_timeout
        last = ""
        with self._lock:
            self.stats["requests"] += 1
        for attempt in range(self.retries + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0.01:
                break
            if attempt:
                with self._lock:
                    self.stats["retries"] += 1
            try:
                passages = self.parse_response(self._attempt(data, content_type, min(self.timeout, remaining)))
                return passages[: max(0, int(topk))]
            except _Retryable as e:
                last = str(e)
            except SearchBackendError:
                with self._lock:
                    self.stats["failures"] += 1
                raise
            wait = min(2.0, self.backoff * 2**attempt)
            if attempt < self.retries:
                time.sleep(max(0.0, min(wait, deadline - time.monotonic())))
        with self._lock:
            self.stats["failures"] += 1
        raise SearchBackendError(f"the retrieval server at {self.url} failed after {attempt + 1} "
                                 f"attempt(s) within {self.total_timeout:.3g} s: {last}")

    def close(self) -> None:
        """Nothing to release (no persistent connection); present for the `Retriever` protocol."""

    def __repr__(self) -> str:
        return f"HTTPRetriever({self.url!r}, timeout={self.timeout}, retries={self.retries})"
