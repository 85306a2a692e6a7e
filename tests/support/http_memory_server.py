"""A loopback mem0-style memory service for tests: ``POST /memories`` adds, ``POST /search``
searches, backed by a real embedded ``MemoryStore`` (hashing embedder). Records requests;
``delay`` makes it slow (for timeouts); ``status`` forces an error answer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evalloop.memory import HashingEmbedder, MemoryStore


@dataclass
class MemoryServer:
    """Handle on a running memory service."""

    url: str
    store: MemoryStore
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    status: int = 200


def _handler(state: MemoryServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append((self.path, body))
            if state.delay:
                time.sleep(state.delay)
            if state.status != 200:
                self._send(state.status, {"detail": "forced failure"})
                return
            if self.path in ("/memories", "/v2/memories"):
                self._add(body)
            elif self.path in ("/search", "/v2/search"):
                self._search(body)
            else:
                self._send(404, {"detail": "Not Found"})

        def _add(self, body: dict[str, Any]) -> None:
            text = "\n".join(m["content"] for m in body["messages"])
            meta = dict(body.get("metadata") or {})
            mid = state.store.store(text, meta.get("tags", []), meta)
            self._send(200, {"results": [{"id": mid, "memory": text, "event": "ADD"}]})

        def _search(self, body: dict[str, Any]) -> None:
            tags = (body.get("filters") or {}).get("tags")
            hits = state.store.find(body["query"], int(body.get("limit", 5)), tags)
            results = [
                {
                    "id": h.record.id,
                    "memory": h.record.information,
                    "score": h.score,
                    "metadata": h.record.metadata,
                    "created_at": h.record.created_at.isoformat() if h.record.created_at else None,
                    "user_id": body.get("user_id"),
                }
                for h in hits
            ]
            self._send(200, {"results": results})

    return Handler


@pytest.fixture
def memory_server(tmp_path: Path) -> Iterator[MemoryServer]:
    """A running memory service on 127.0.0.1 and a free port."""
    store = MemoryStore(tmp_path / "service.db", embedder=HashingEmbedder(128))
    server = ThreadingHTTPServer(("127.0.0.1", 0), None)  # type: ignore[arg-type]
    state = MemoryServer(url=f"http://127.0.0.1:{server.server_address[1]}", store=store)
    server.RequestHandlerClass = _handler(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        store.close()
