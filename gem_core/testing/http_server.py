"""`ScriptedHTTPServer`: the base of the local HTTP servers tests talk to (one behaviour per request).

A threaded server on 127.0.0.1 (an ephemeral port; no socket to the outside) whose
answers follow ``script``; a subclass says what a POST (and a GET) gets. The fakes built
on it: `gem_core.testing.openai_server.FakeOpenAIServer` (an OpenAI-compatible model
server) and the retrieval server of the search tests.

Example::

    class Echo(ScriptedHTTPServer):
        def handle_post(self, request):
            mode = self.next_mode()
            if mode == "hang":
                return self.hang()
            request.reply(200, request.read_body())
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Request", "ScriptedHTTPServer"]


class Request(BaseHTTPRequestHandler):
    """One request to a `ScriptedHTTPServer` (the handler `http.server` makes per request)."""

    server_obj: ScriptedHTTPServer  # set on the per-server subclass

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.server_obj.handle_get(self)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.server_obj.handle_post(self)

    def read_body(self) -> bytes:
        """The request body (``Content-Length`` bytes; none without the header)."""
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def reply(self, code: int, payload: bytes, content_type: str = "application/json") -> None:
        """Answer ``payload`` with status ``code``; a client that gave up is ignored."""
        try:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (timeout)
            pass


class ScriptedHTTPServer:
    """A threaded HTTP server on 127.0.0.1 whose answers follow a script of behaviours.

    Subclasses implement `handle_post` (and may override `handle_get`, which answers 404);
    `next_mode` pops the next behaviour of ``script`` (``default`` once it is empty).

    Attributes:
        script: one behaviour name per request, in arrival order.
        default: the behaviour once ``script`` is empty (``"ok"``).
        requests: what the subclass records of each request.
        release: set on close; `hang` waits for it.
        lock: guards the records (and whatever the subclass shares between requests).
        address: ``http://127.0.0.1:PORT``.
    """

    def __init__(self) -> None:
        self.script: list[str] = []
        self.default = "ok"
        self.requests: list[Any] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.killed = False
        handler = type("BoundRequest", (Request,), {"server_obj": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.address = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def next_mode(self) -> str:
        """The next scripted behaviour (``default`` when the script is empty)."""
        with self.lock:
            return self.script.pop(0) if self.script else self.default

    def hang(self, seconds: float = 30.0) -> None:
        """Answer nothing until the server is closed (or ``seconds`` pass)."""
        self.release.wait(seconds)

    def handle_get(self, request: Request) -> None:
        """Answer a GET (404 unless overridden)."""
        request.reply(404, b'{"error": "not found"}')

    def handle_post(self, request: Request) -> None:
        """Answer a POST."""
        raise NotImplementedError

    def kill(self) -> None:
        """Stop serving: from now on connections are refused (a server that died)."""
        if not self.killed:
            self.killed = True
            self.release.set()
            self.httpd.shutdown()
            self.httpd.server_close()

    def close(self) -> None:
        """Stop serving and release the hanging answers (idempotent)."""
        self.kill()

    def __enter__(self) -> ScriptedHTTPServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
