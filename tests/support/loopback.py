"""Shared parts of the tests' HTTP servers: a JSON request handler, and serving one on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet handler that reads and writes JSON bodies."""

    def log_message(self, *args: Any) -> None:
        pass

    def read_json(self) -> Any:
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        return json.loads(raw or b"null")

    def send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the listen backlog: a suite's concurrent calls are not dropped (5 by default)
    daemon_threads = True


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler] | None = None) -> Iterator[ThreadingHTTPServer]:
    """A threading HTTP server on 127.0.0.1 and a free port, in a daemon thread, until the block ends.

    ``handler`` may be set later (``server.RequestHandlerClass``) when it needs the server's URL.
    """
    server = _Server(("127.0.0.1", 0), handler)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
