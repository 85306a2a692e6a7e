"""mem0 as a retriever: any retrieval suite benchmarks a mem0 server with one line of config.

``retriever: mem0`` (or ``evalloop compare-targets -s retrieval-memory -t mem0``) adds every
corpus document to the server as one raw memory (``infer=false``) carrying its id in metadata
(``doc_id``), under a fresh scope (``user_id`` ``evalloop-bench-<random>``) per index build, so
runs never see each other's documents; searches ask for ``top_k`` with no score cut-off and map
hits back to document ids; the scope is deleted (``DELETE /memories?user_id=…``) when the index
is rebuilt, the retriever is closed, or the process exits.

The server comes from ``options: {url: …}``, else ``EVALLOOP_MEM0_URL``, else the memory
service URL (``EVALLOOP_MEMORY_URL``); ``headers`` carry its auth.
"""

from __future__ import annotations

import atexit
import uuid
from collections.abc import Mapping
from typing import Any

from evalloop.environ import environment
from evalloop.errors import TargetError
from evalloop.memory.adapters import HTTPMemoryAdapter, HTTPMemoryConfig
from evalloop.retrieval.types import Doc


class Mem0Retriever:
    """A mem0 REST server as a :class:`~evalloop.retrieval.types.Retriever`."""

    name = "mem0"

    def __init__(self, url: str | None = None, headers: Mapping[str, str] | None = None,
                 timeout: float = 30.0, threshold: float = 0.0) -> None:
        env = environment()
        url = url or env.mem0_url or env.memory_url
        if not url:
            raise TargetError("the mem0 retriever needs the server's URL",
                              hint="set EVALLOOP_MEM0_URL, or give the retriever options: {url: http://…}")
        self.url, self.headers, self.timeout, self.threshold = url, dict(headers or {}), timeout, threshold
        self.scope: str | None = None
        self._adapter: HTTPMemoryAdapter | None = None
        atexit.register(self.close)

    def build_index(self, corpus: list[Doc]) -> None:
        self.close()
        self.scope = f"evalloop-bench-{uuid.uuid4().hex[:12]}"
        self._adapter = HTTPMemoryAdapter(HTTPMemoryConfig(
            base_url=self.url, headers=self.headers, timeout=self.timeout, user_id=self.scope,
            threshold=self.threshold))
        for doc in corpus:
            self._adapter.store(doc.content, metadata={"doc_id": doc.key})

    def _hits(self, query: str, k: int) -> list[Any]:
        if self._adapter is None or not query.strip():
            return []
        return self._adapter.find(query, limit=k, threshold=self.threshold)

    def retrieve(self, query: str, k: int) -> list[str]:
        ids = [str(h.record.metadata.get("doc_id", "")) for h in self._hits(query, k)]
        return list(dict.fromkeys(i for i in ids if i))[:k]

    def search_texts(self, query: str, k: int) -> list[str]:
        return [h.information for h in self._hits(query, k)]

    def close(self) -> None:
        """Delete this build's scope on the server (best effort) and close the connection."""
        adapter, self._adapter = self._adapter, None
        if adapter is None:
            return
        try:
            adapter.delete_all()
        except Exception:  # noqa: BLE001, S110 - cleanup must not mask the benchmark's result
            pass
        finally:
            adapter.close()
