"""A webhook receiver on 127.0.0.1 for tests: records every POST, answers with scripted statuses."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class WebhookServer:
    """``statuses`` are answered in order (the last one repeats); ``delay`` seconds before each."""

    statuses: list[int] = field(default_factory=lambda: [200])
    delay: float = 0.0
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def status_for(self, index: int) -> int:
        return self.statuses[min(index, len(self.statuses) - 1)]


@contextmanager
def webhook_server(statuses: list[int] | None = None, delay: float = 0.0) -> Iterator[WebhookServer]:
    state = WebhookServer(statuses=statuses or [200], delay=delay)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            with lock:
                index = len(state.received)
                state.received.append(Received(self.path, dict(self.headers), json.loads(raw or b"null")))
            if state.delay:
                time.sleep(state.delay)
            status = state.status_for(index)
            body = json.dumps({"ok": status < 400}).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """A loopback URL on which nothing listens (the port was bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
