"""A loopback embeddings server for tests: OpenAI ``POST /v1/embeddings`` and Ollama
``POST /api/embed``, answering with real ``HashingEmbedder`` vectors (unnormalised ×3, so the
client's normalisation is exercised). Records every request; ``status`` forces an error."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from evalloop.memory.embedders import HashingEmbedder
from support.loopback import JSONHandler, serving


@dataclass
class EmbeddingsServer:
    """Handle on a running server: its URL, the requests seen, and a forced status."""

    url: str
    dim: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    status: int = 200


def _handler(state: EmbeddingsServer, embedder: HashingEmbedder) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            if state.status != 200:
                self.send_json(state.status, {"error": {"message": "forced failure"}})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = (embedder.embed(texts) * 3.0).tolist()
            if self.path == "/v1/embeddings":
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
                self.send_json(200, {"object": "list", "data": data[::-1], "model": body["model"]})
            elif self.path == "/api/embed":
                self.send_json(200, {"model": body["model"], "embeddings": vectors})
            else:
                self.send_json(404, {"error": "not found"})

    return Handler


@pytest.fixture
def embeddings_server() -> Iterator[EmbeddingsServer]:
    """A running embeddings server on 127.0.0.1 and a free port."""
    embedder = HashingEmbedder(64)
    with serving() as server:
        state = EmbeddingsServer(url=f"http://127.0.0.1:{server.server_address[1]}", dim=64)
        server.RequestHandlerClass = _handler(state, embedder)
        yield state
