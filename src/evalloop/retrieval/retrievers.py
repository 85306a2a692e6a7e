"""The retrievers a suite names (``bm25``, ``hybrid``, ``hybrid-seed000``, ``memory``,
``module:Class``), evalloop's own store as a Retriever, and one index per scope.

A scoped dataset (documents and queries with a ``scope``: a conversation, a user, a session)
is searched the way LoCoMo and LongMemEval are scored: :class:`ScopedIndex` builds one fresh
retriever per scope and sends each query only to the index of its own scope.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from evalloop.errors import TargetError
from evalloop.retrieval.fts import database_bytes
from evalloop.retrieval.metrics import DEFAULT_KS
from evalloop.retrieval.reference_retrievers import Fts5Bm25Retriever, OpenClawHybridRetriever
from evalloop.retrieval.retriever_eval import RetrievalResult, build_index, result_from_run
from evalloop.retrieval.types import Doc, Retriever, as_retriever, retriever_name

if TYPE_CHECKING:
    from evalloop.retrieval.dataset import Dataset

ALIASES = {"bm25": "bm25", "fts5": "bm25", "fts5-bm25": "bm25", "hybrid": "hybrid",
           "openclaw-hybrid": "hybrid", "hybrid-seed000": "hybrid-seed000",
           "openclaw-seed000": "hybrid-seed000", "memory": "memory", "evalloop-memory": "memory",
           "mem0": "mem0", "mem0-infer": "mem0-infer"}


class MemoryStoreRetriever:
    """evalloop's own :class:`~evalloop.memory.MemoryStore` (FTS5 + vectors, fused) as a Retriever.

    ``options`` (``text_weight``, ``vector_weight``, ``text_only``, ``vector_only``, …) are
    handed to the store's search, so an ablation can switch a side off.
    """

    name = "evalloop-memory"

    def __init__(self, embedder: Any = None, path: str = ":memory:", **search: Any) -> None:
        from evalloop.memory.search import Fusion

        Fusion(**search)  # unknown or bad options fail here, before any document is stored
        self.embedder, self.path, self.search_options = embedder, path, dict(search)
        self._store: Any = None
        self._docs: dict[str, list[str]] = {}

    def build_index(self, corpus: list[Doc]) -> None:
        from evalloop.memory import MemoryStore

        if self._store is not None:
            self._store.close()
        self._store = MemoryStore(self.path, self.embedder, **self.search_options)
        ids = self._store.store_many([{"information": d.content, "metadata": {"doc_id": d.key}}
                                      for d in corpus])
        self._docs = {}
        for mem_id, doc in zip(ids, corpus, strict=True):  # identical texts share one memory
            self._docs.setdefault(mem_id, []).append(doc.key)

    def _find(self, query: str, k: int) -> list[Any]:
        return self._store.find(query, k) if self._store is not None else []

    def retrieve(self, query: str, k: int) -> list[str]:
        out = [doc for hit in self._find(query, k) for doc in self._docs.get(hit.record.id, [])]
        return out[:k]

    def search_texts(self, query: str, k: int) -> list[str]:
        return [hit.information for hit in self._find(query, k)]

    def index_size_bytes(self) -> int:
        conn = getattr(self._store, "_conn", None)
        return database_bytes(conn) if conn is not None else 0


def _embedder(spec: str | None) -> Any:
    from evalloop.memory.embedders import resolve_embedder

    return resolve_embedder(spec)


def retriever_factory(spec: str, *, embedder: str | None = None,
                      options: Mapping[str, Any] | None = None) -> Callable[[], Retriever]:
    """A factory of fresh retrievers: ``bm25`` | ``hybrid`` | ``hybrid-seed000`` | ``memory`` |
    ``mem0`` | ``mem0-infer`` | ``module:Class``.

    ``options`` are keyword arguments for the retriever; ``embedder`` is an embedder spec
    (``default``, ``hashing:256``, …) for the retrievers that embed. A ``module:function`` that
    is not a class is used as a bare ``retrieve(query, k)`` callable.
    """
    opts = dict(options or {})
    kind = ALIASES.get(spec)
    if kind == "bm25":
        return lambda: Fts5Bm25Retriever(**opts)
    if kind == "hybrid":
        return lambda: OpenClawHybridRetriever.calibrated(_embedder(embedder), **opts)
    if kind == "hybrid-seed000":
        return lambda: OpenClawHybridRetriever.seed_faithful(_embedder(embedder), **opts)
    if kind == "memory":
        return lambda: MemoryStoreRetriever(_embedder(embedder), **opts)
    if kind == "mem0":
        from evalloop.retrieval.mem0 import Mem0Retriever

        return lambda: Mem0Retriever(**opts)
    if kind == "mem0-infer":
        from evalloop.retrieval.mem0_infer import Mem0InferRetriever

        return lambda: Mem0InferRetriever(_embedder(embedder), **opts)
    if ":" not in spec:
        raise TargetError(f"unknown retriever {spec!r}",
                          hint="use bm25, hybrid, hybrid-seed000, memory, mem0, mem0-infer, or your module:Class")
    from evalloop.run.targets import _import

    obj = _import(spec, Path.cwd())
    if isinstance(obj, type):
        return lambda: as_retriever(obj(**opts))
    return lambda: as_retriever(obj)


_OPTIONS = re.compile(r"^(?P<spec>[^\[\]]+)\[(?P<opts>[^\[\]]*)\]$")


def parse_spec(label: str) -> tuple[str, dict[str, Any]]:
    """``memory[vector_weight=0, text_weight=1]`` -> ``("memory", {...})``: a retriever with some
    options set, as ``compare-targets`` takes it for an ablation. Values are read as YAML scalars."""
    match = _OPTIONS.match(label.strip())
    if match is None:
        return label.strip(), {}
    options: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in match.group("opts").split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise TargetError(f"bad option {part!r} in {label!r}",
                              hint="write retriever[option=value, ...], e.g. memory[vector_weight=0]")
        options[key.strip()] = yaml.safe_load(value.strip())
    return match.group("spec").strip(), options


class _Corpus:
    """The slice of a Dataset that :func:`build_index` reads."""

    def __init__(self, corpus: list[Doc]) -> None:
        self.corpus = corpus


class ScopedIndex:
    """One retriever per scope (a single one, scope ``None``, for an unscoped corpus).

    Build time and index size are summed over the scopes; a query names its scope.
    """

    def __init__(self, factory: Callable[[], Retriever], corpus: Sequence[Doc]) -> None:
        from evalloop.retrieval.substring import text_search

        groups: dict[str | None, list[Doc]] = {}
        for doc in corpus:
            groups.setdefault(doc.scope, []).append(doc)
        self.parts: dict[str | None, tuple[Retriever, Callable[[str, int], Sequence[str]]]] = {}
        self.build_s: float | None = None
        self.index_bytes: int | None = None
        for scope, docs in groups.items():
            retriever = factory()
            build_s, size = build_index(retriever, _Corpus(docs))
            if build_s is not None:
                self.build_s = (self.build_s or 0.0) + build_s
            if size is not None:
                self.index_bytes = (self.index_bytes or 0) + size
            self.parts[scope] = (retriever, text_search(retriever, docs))

    @property
    def scoped(self) -> bool:
        return None not in self.parts

    def first(self) -> Retriever:
        """Any one of the retrievers (for its name)."""
        return next(iter(self.parts.values()))[0]

    def _part(self, scope: str | None) -> tuple[Retriever, Callable[[str, int], Sequence[str]]]:
        key = scope if self.scoped else None
        if key not in self.parts:
            what = "has no scope" if key is None else f"names scope {key!r}, which has no documents"
            raise TargetError(f"the query {what}",
                              hint="a scoped dataset's queries name the scope they search")
        return self.parts[key]

    def retrieve(self, query: str, k: int, scope: str | None = None) -> Sequence[str | int]:
        return self._part(scope)[0].retrieve(query, k)

    def texts(self, query: str, k: int, scope: str | None = None) -> Sequence[str]:
        return self._part(scope)[1](query, k)


def run_scoped(factory: Callable[[], Retriever], dataset: Dataset, *, k: int = 20,
               ks: Iterable[int] = DEFAULT_KS, name: str | None = None) -> RetrievalResult:
    """Score a retriever on a (scoped or unscoped) dataset: one fresh retriever per scope, each
    query sent to its own scope's, metrics over all queries and per stratum (as a suite run)."""
    ks = tuple(sorted(set(ks)))
    index = ScopedIndex(factory, dataset.corpus)
    label = name or retriever_name(index.first())
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    for q in dataset.queries:
        start = time.perf_counter()
        ids = index.retrieve(q.text, k, q.scope)
        latencies.append((time.perf_counter() - start) * 1000.0)
        run[q.query_id] = list(dict.fromkeys(str(i) for i in ids))[:k]
    return result_from_run(run, dataset, ks=ks, k=k, name=label, latency_ms=latencies,
                           build_s=index.build_s, index_bytes=index.index_bytes)
