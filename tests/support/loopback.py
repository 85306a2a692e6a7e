"""Shared parts of the tests' HTTP servers: a JSON request handler, serving one on 127.0.0.1, and a
server that accepts connections and never answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
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


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers (a memory service
    that hangs). ``connections`` counts the accepted ones; closing it closes them all."""

    def __init__(self) -> None:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.accepted: list[Any] = []
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        return len(self.accepted)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            self.accepted.append(conn)
            self.connected.set()

    def close(self) -> None:
        import socket

        for conn in self.accepted:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        with suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._sock.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
