"""A loopback mem0-style memory service for tests: ``POST /memories`` adds, ``POST /search``
searches (``top_k``, identity inside ``filters``), ``GET /memories`` lists, ``PUT /memories/{id}``
updates, backed by a real embedded ``MemoryStore`` (hashing embedder). Records requests;
``delay`` makes it slow (for timeouts); ``status`` forces an error answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from evalloop.memory import HashingEmbedder, MemoryStore
from support.loopback import JSONHandler, serving


@dataclass
class MemoryServer:
    """Handle on a running memory service."""

    url: str
    store: MemoryStore
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    status: int = 200
    rewrite: str | None = None  # store this text instead (a server that ignores infer=false)


def _handler(state: MemoryServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def _gate(self, body: dict[str, Any]) -> bool:
            state.requests.append((self.path, body))
            if state.delay:
                time.sleep(state.delay)
            if state.status != 200:
                self.send_json(state.status, {"detail": "forced failure"})
                return False
            return True

        def do_POST(self) -> None:
            body = self.read_json()
            if not self._gate(body):
                return
            if self.path in ("/memories", "/v2/memories"):
                self._add(body)
            elif self.path in ("/search", "/v2/search"):
                self._search(body)
            else:
                self.send_json(404, {"detail": "Not Found"})

        def do_GET(self) -> None:
            if not self._gate({}):
                return
            records = state.store.list(limit=1000)
            self.send_json(200, {"results": [_item(r) for r in records]})

        def do_PUT(self) -> None:
            body = self.read_json()
            if not self._gate(body):
                return
            mid = self.path.rsplit("/", 1)[-1]
            meta = dict(body.get("metadata") or {})
            state.store.update(mid, body["text"], meta.get("tags", []), meta)
            self.send_json(200, {"message": "Memory updated successfully!"})

        def _add(self, body: dict[str, Any]) -> None:
            text = state.rewrite or "\n".join(m["content"] for m in body["messages"])
            meta = dict(body.get("metadata") or {})
            mid = state.store.store(text, meta.get("tags", []), meta)
            self.send_json(200, {"results": [{"id": mid, "memory": text, "event": "ADD"}]})

        def _search(self, body: dict[str, Any]) -> None:
            tags = (body.get("filters") or {}).get("tags")
            hits = state.store.find(body["query"], int(body.get("top_k", 5)), tags)
            self.send_json(200, {"results": [{**_item(h.record), "score": h.score} for h in hits]})

    return Handler


def _item(record: Any) -> dict[str, Any]:
    return {"id": record.id, "memory": record.information, "metadata": record.metadata,
            "created_at": record.created_at.isoformat() if record.created_at else None}


@pytest.fixture
def memory_server(tmp_path: Path) -> Iterator[MemoryServer]:
    """A running memory service on 127.0.0.1 and a free port."""
    store = MemoryStore(tmp_path / "service.db", embedder=HashingEmbedder(128))
    try:
        with serving() as server:
            state = MemoryServer(url=f"http://127.0.0.1:{server.server_address[1]}", store=store)
            server.RequestHandlerClass = _handler(state)
            yield state
    finally:
        store.close()
