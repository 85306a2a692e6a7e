"""A small mem0 REST server for tests, run as its own process on 127.0.0.1.

It follows the request models of mem0's own ``server/main.py`` (``MemoryCreate``, ``SearchRequest``,
``GET``/``PUT``/``DELETE /memories``) in front of a real ``mem0.Memory`` (``mem0ai`` 2.2.x): local
Qdrant on a temp path, the OpenAI embedder pointed at a loopback embeddings server, no LLM call
(memories are added with ``infer=False``). As mem0 2.x requires, the identity goes into
``filters`` for search and list. Usage: ``python mem0_rest.py PORT_FILE EMBED_URL DIM DATA_DIR``.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from pydantic import BaseModel, Field, ValidationError

os.environ["MEM0_TELEMETRY"] = "False"  # no network: mem0's telemetry is off


class Message(BaseModel):
    role: str
    content: str


class MemoryCreate(BaseModel):
    messages: list[Message]
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    infer: bool | None = None


class SearchRequest(BaseModel):
    query: str
    user_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    filters: dict[str, Any] | None = None
    top_k: int | None = Field(default=None, ge=1)
    threshold: float | None = Field(default=None, ge=0, le=1)


class MemoryUpdate(BaseModel):
    text: str | None = None
    metadata: dict[str, Any] | None = None


IDS = ("user_id", "agent_id", "run_id")


def build(embed_url: str, dim: int, data: str) -> Any:
    from mem0 import Memory

    return Memory.from_config({
        "vector_store": {"provider": "qdrant", "config": {"path": f"{data}/qdrant", "collection_name": "evalloop",
                                                          "embedding_model_dims": dim, "on_disk": True}},
        "embedder": {"provider": "openai", "config": {"api_key": "test", "openai_base_url": embed_url,
                                                      "model": "evalloop", "embedding_dims": dim}},
        "llm": {"provider": "openai", "config": {"api_key": "test", "openai_base_url": "http://127.0.0.1:9/v1",
                                                 "model": "unused"}},
        "history_db_path": f"{data}/history.db",
    })


def handler(memory: Any) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body, default=str).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            return json.loads(raw or b"{}")

        def _run(self, fn: Any) -> None:
            try:
                self._send(200, fn())
            except ValidationError as exc:
                self._send(422, {"detail": exc.errors(include_url=False)})
            except ValueError as exc:
                self._send(400, {"detail": str(exc)})
            except Exception as exc:  # noqa: BLE001 - the server's 500, as mem0's does
                self._send(500, {"detail": f"{type(exc).__name__}: {exc}"})

        def _query(self) -> dict[str, str]:
            return {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}

        def do_POST(self) -> None:
            path = urlparse(self.path).path
            if path == "/memories":
                self._run(self._add)
            elif path == "/search":
                self._run(self._search)
            else:
                self._send(404, {"detail": "Not Found"})

        def _add(self) -> Any:
            req = MemoryCreate.model_validate(self._body())
            if not any(getattr(req, k) for k in IDS):
                raise ValueError("At least one identifier (user_id, agent_id, run_id) is required.")
            params = {k: v for k, v in req.model_dump().items() if v is not None and k != "messages"}
            return memory.add(messages=[m.model_dump() for m in req.messages], **params)

        def _search(self) -> Any:
            req = SearchRequest.model_validate(self._body())
            filters = {**{k: getattr(req, k) for k in IDS if getattr(req, k)}, **(req.filters or {})}
            params: dict[str, Any] = {"filters": filters}
            if req.top_k is not None:
                params["top_k"] = req.top_k
            if req.threshold is not None:
                params["threshold"] = req.threshold
            return memory.search(query=req.query, **params)

        def do_GET(self) -> None:
            path, q = urlparse(self.path).path, self._query()
            if path == "/memories":
                filters = {k: q[k] for k in IDS if q.get(k)}
                self._run(lambda: memory.get_all(filters=filters, top_k=int(q.get("top_k", 100))))
            elif path.startswith("/memories/"):
                self._run(lambda: memory.get(path.rsplit("/", 1)[-1]))
            else:
                self._send(404, {"detail": "Not Found"})

        def do_PUT(self) -> None:
            mid = urlparse(self.path).path.rsplit("/", 1)[-1]
            req = MemoryUpdate.model_validate(self._body())
            self._run(lambda: memory.update(mid, text=req.text, metadata=req.metadata))

        def do_DELETE(self) -> None:
            q = self._query()
            params = {k: q[k] for k in IDS if q.get(k)}
            if not params:
                self._send(400, {"detail": "At least one identifier is required."})
                return
            self._run(lambda: (memory.delete_all(**params), {"message": "All relevant memories deleted"})[1])

    return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the listen backlog: a suite's concurrent calls are not dropped (5 by default)
    daemon_threads = True


def main() -> None:
    port_file, embed_url, dim, data = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    server = _Server(("127.0.0.1", 0), handler(build(embed_url, dim, data)))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
