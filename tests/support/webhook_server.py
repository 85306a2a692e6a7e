"""A webhook receiver on 127.0.0.1 for tests: records every POST, answers with scripted statuses."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from support.loopback import JSONHandler, serving


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

    class Handler(JSONHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            body = self.read_json()
            with lock:
                index = len(state.received)
                state.received.append(Received(self.path, dict(self.headers), body))
            if state.delay:
                time.sleep(state.delay)
            status = state.status_for(index)
            self.send_json(status, {"ok": status < 400})

    with serving(Handler) as server:
        state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        yield state


def closed_port_url() -> str:
    """A loopback URL on which nothing listens (the port was bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
