"""The reference retrievers a benchmark measures others against: FTS5 BM25 over OR-joined quoted
tokens, the OpenClaw-style hybrid, and their registry (:func:`reference_retrievers`).

The OpenClaw-style hybrid lives in :mod:`evalloop.retrieval.hybrid` and is re-exported here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from evalloop.retrieval.fts import database_bytes, match_query
from evalloop.retrieval.hybrid import OpenClawHybridRetriever
from evalloop.retrieval.types import Doc, Retriever

if TYPE_CHECKING:
    from evalloop.memory.embedders import Embedder

__all__ = ["Fts5Bm25Retriever", "OpenClawHybridRetriever", "reference_retrievers"]

FTS_FIELDS = ("content", "category", "tags", "expanded_keywords")


class Fts5Bm25Retriever:
    """FTS5 over content, category, tags and expanded_keywords; ``bm25()`` then importance.

    Each query becomes ``"w1" OR "w2" …`` so any shared word can match; ranking is BM25
    ascending (FTS5 scores are negative, best first) with higher ``importance`` breaking ties.
    """

    name = "fts5-bm25"

    def __init__(self, path: str = ":memory:", fields: Sequence[str] = FTS_FIELDS) -> None:
        self.fields = tuple(fields)
        self._conn = sqlite3.connect(path, check_same_thread=False)

    def build_index(self, corpus: list[Doc]) -> None:
        cols = ", ".join(self.fields)
        self._conn.execute("DROP TABLE IF EXISTS docs")
        self._conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(doc_id UNINDEXED, importance UNINDEXED, {cols})")
        rows = []
        for doc in corpus:
            values = [_text(doc.content if f == "content" else doc.field(f)) for f in self.fields]
            importance = doc.field("importance", 0.0)
            rows.append((doc.key, float(importance or 0.0), *values))
        marks = ", ".join("?" for _ in range(2 + len(self.fields)))
        self._conn.executemany(f"INSERT INTO docs VALUES ({marks})", rows)
        self._conn.commit()

    def retrieve(self, query: str, k: int) -> list[str]:
        match = match_query(query, "OR")
        if match is None:
            return []
        rows = self._conn.execute(
            "SELECT doc_id FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), importance DESC LIMIT ?",
            (match, k),
        ).fetchall()
        return [r[0] for r in rows]

    def index_size_bytes(self) -> int:
        return database_bytes(self._conn)

    def close(self) -> None:
        self._conn.close()


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


RetrieverFactory = Callable[["Embedder | None"], Retriever | None]


def _hybrid(embedder: Embedder | None) -> Retriever | None:
    return OpenClawHybridRetriever(embedder) if embedder is not None else None


REFERENCE_RETRIEVERS: dict[str, RetrieverFactory] = {
    "fts5-bm25": lambda _embedder: Fts5Bm25Retriever(),
    "openclaw-hybrid": _hybrid,
}
"""Name -> factory for the reference retrievers; add evalloop's own store here to compare it."""


def reference_retrievers(embedder: Embedder | None = None, names: Sequence[str] | None = None) -> dict[str, Retriever]:
    """Fresh instances of the registered reference retrievers (those needing an embedder are
    skipped when none is given)."""
    out: dict[str, Retriever] = {}
    for name in names or list(REFERENCE_RETRIEVERS):
        made = REFERENCE_RETRIEVERS[name](embedder)
        if made is not None:
            out[name] = made
    return out
