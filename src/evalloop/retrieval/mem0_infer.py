"""mem0 with its LLM extraction as a retriever: what mem0's paper measures, run in process.

``retriever: mem0-infer`` (or ``compare-targets -t mem0-infer``) builds a real ``mem0.Memory``
(``mem0ai``) per index: local Qdrant in a temporary folder, **evalloop's embedder** (the suite's
``embedder``, else the default) and **evalloop's LLM client** (``ANTHROPIC_API_KEY`` or
``EVALLOOP_LLM_BASE_URL``, the same client the run answers with; ``model`` picks another model).
Documents are added ``batch`` at a time (default 1; mem0's own LoCoMo run added two messages at
a time), each as a user message, with ``infer=True`` and ``instructions`` (mem0's custom
extraction instructions, none by default): mem0's LLM extracts the facts it keeps, and those
facts, not the documents, are what a search returns and what the answer model is shown. Each
fact carries the ids of the documents it came from (mem0 copies an add's metadata onto every
fact it extracts), so hit@k and recall still count.

What extraction costs is measured: LLM calls, tokens and USD of the build
(:meth:`Mem0InferRetriever.build_stats`), and the memory's size is the facts it holds
(:meth:`Mem0InferRetriever.memory_texts`). ``infer: false`` stores the documents raw, as the
REST ``mem0`` retriever does (:mod:`evalloop.retrieval.mem0`), and needs no LLM.

mem0 calls its LLM synchronously from inside ``add``; evalloop's clients are async, so the calls
go through one private event loop on a thread of its own, opened for an index build and closed
when the build ends (searching calls no LLM).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import uuid
from collections.abc import Coroutine
from typing import Any

from evalloop.errors import ConfigError
from evalloop.retrieval.types import Doc


class _Loop:
    """A private event loop on its own thread: async calls from synchronous code that may itself
    run inside another event loop (a target's setup does)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evalloop-mem0-llm", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class _Embedding:
    """evalloop's embedder in the shape mem0 calls (``embed``, ``embed_batch``)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed(self, text: Any, memory_action: str | None = None) -> list[float]:
        return [float(x) for x in self.embedder.embed([str(text)])[0]]

    def embed_batch(self, texts: list[str], memory_action: str | None = None) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed([str(t) for t in texts])]


class _LLM:
    """evalloop's LLM client in the shape mem0 calls (``generate_response`` -> text), counting
    what the extraction spends."""

    def __init__(self, model: str | None, max_tokens: int) -> None:
        from evalloop.llm.clients import client_from_env

        self.loop = _Loop()
        self.client = client_from_env(model)
        if self.client is None:
            self.loop.close()
            raise ConfigError("mem0-infer extracts facts with an LLM, and none is configured",
                              where="retriever mem0-infer",
                              hint="set ANTHROPIC_API_KEY (or EVALLOOP_LLM_BASE_URL), or give it infer: false")
        self.max_tokens = max_tokens
        self.calls = self.tokens_in = self.tokens_out = 0
        self.cost_usd = 0.0
        self.snapshots: set[str] = set()

    def generate_response(self, messages: list[dict[str, Any]], response_format: Any = None,
                          tools: Any = None, tool_choice: str = "auto", **_: Any) -> str:
        from evalloop.llm.types import LLMRequest, Message

        system = "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "system") or None
        turns = [Message(role="assistant" if m.get("role") == "assistant" else "user", content=str(m["content"]))
                 for m in messages if m.get("role") != "system"]
        assert self.client is not None
        request = LLMRequest(model=self.client.model, system=system, messages=turns,
                             max_tokens=self.max_tokens, temperature=0.0)
        response = self.loop.run(self.client.complete(request))
        self.calls += 1
        self.tokens_in += response.usage.input_tokens
        self.tokens_out += response.usage.output_tokens
        self.cost_usd += response.cost_usd
        self.snapshots.add(response.model)
        return response.text

    def close(self) -> None:
        if self.client is None:
            return
        client, self.client = self.client, None
        closer = getattr(client, "aclose", None)
        if callable(closer):
            self.loop.run(closer())
        self.loop.close()


class Mem0InferRetriever:
    """A real in-process ``mem0.Memory`` with its LLM extraction on, as a Retriever."""

    name = "mem0-infer"

    def __init__(self, embedder: Any = None, infer: bool = True, model: str | None = None,
                 max_tokens: int = 2000, batch: int = 1, instructions: str | None = None) -> None:
        if batch < 1:
            raise ValueError(f"batch must be 1 or more documents per add, not {batch}")
        os.environ.setdefault("MEM0_TELEMETRY", "False")  # before mem0 is imported: no network
        try:
            import mem0  # noqa: F401
        except ImportError:
            raise ConfigError("the mem0-infer retriever runs mem0 in process, and mem0ai is not installed",
                              hint="pip install 'evalloop[mem0]'") from None
        if embedder is None:
            from evalloop.memory.embedders import default_embedder

            embedder = default_embedder()
        self.embedder, self.infer, self.model, self.max_tokens = embedder, infer, model, max_tokens
        self.batch, self.instructions = batch, instructions
        self.llm: _LLM | None = None
        self._memory: Any = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.scope = ""

    def describe_embedder(self) -> dict[str, Any]:
        return {"name": getattr(self.embedder, "name", type(self.embedder).__name__),
                "dim": int(self.embedder.dim)}

    def build_index(self, corpus: list[Doc]) -> None:
        from mem0 import Memory

        self.close()
        self._dir = tempfile.TemporaryDirectory(prefix="evalloop-mem0-")
        path, dim = self._dir.name, int(self.embedder.dim)
        unused = {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}  # replaced below
        memory = Memory.from_config({
            "vector_store": {"provider": "qdrant", "config": {
                "path": f"{path}/qdrant", "on_disk": True, "collection_name": "evalloop", "embedding_model_dims": dim}},
            "embedder": {"provider": "openai", "config": {**unused, "model": "evalloop", "embedding_dims": dim}},
            "llm": {"provider": "openai", "config": {**unused, "model": "evalloop"}},
            "history_db_path": f"{path}/history.db",
        })
        memory.embedding_model = _Embedding(self.embedder)
        if self.infer:
            self.llm = _LLM(self.model, self.max_tokens)
            memory.llm = self.llm
        self._memory, self.scope = memory, f"evalloop-bench-{uuid.uuid4().hex[:12]}"
        try:
            for start in range(0, len(corpus), self.batch):
                docs = corpus[start:start + self.batch]
                memory.add([{"role": "user", "content": d.content} for d in docs], user_id=self.scope,
                           metadata={"doc_ids": [d.key for d in docs]}, infer=self.infer,
                           prompt=self.instructions)
        finally:  # only adding calls the LLM: its loop and connections end with the build
            if self.llm is not None:
                self.llm.close()

    def _hits(self, query: str, k: int) -> list[dict[str, Any]]:
        if self._memory is None or not query.strip():
            return []
        found = self._memory.search(query, filters={"user_id": self.scope}, top_k=k)
        return list(found.get("results", []) if isinstance(found, dict) else found)

    def retrieve(self, query: str, k: int) -> list[str]:
        ids = [str(i) for h in self._hits(query, k) for i in (h.get("metadata") or {}).get("doc_ids", [])]
        return list(dict.fromkeys(i for i in ids if i))[:k]

    def search_texts(self, query: str, k: int) -> list[str]:
        return [str(h.get("memory", "")) for h in self._hits(query, k)]

    def memory_texts(self) -> list[str]:
        """Every fact mem0 holds for this index (what the memory's size counts)."""
        if self._memory is None:
            return []
        held = self._memory.get_all(filters={"user_id": self.scope}, top_k=100_000)
        return [str(m.get("memory", "")) for m in (held.get("results", []) if isinstance(held, dict) else held)]

    def build_stats(self) -> dict[str, Any]:
        """What the extraction spent building this index: LLM calls, tokens in and out, USD."""
        if self.llm is None:
            return {}
        return {"extraction_calls": self.llm.calls, "extraction_tokens_in": self.llm.tokens_in,
                "extraction_tokens_out": self.llm.tokens_out, "extraction_cost_usd": round(self.llm.cost_usd, 6)}

    def close(self) -> None:
        """Close the local store; the temporary folder goes with it."""
        self.llm = None
        memory, self._memory = self._memory, None
        client = getattr(getattr(memory, "vector_store", None), "client", None)
        if client is not None and callable(getattr(client, "close", None)):
            client.close()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
