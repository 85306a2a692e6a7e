"""Reference hybrid retriever in the OpenClaw style: line chunks, 70 % vector + 30 % FTS5.

Documents are cut into line-based chunks (1600 characters, 320 characters of overlap); each chunk
is embedded and indexed in FTS5. A query takes ``4 × limit`` candidates from each side: vector
candidates score their cosine similarity, keyword candidates (all query tokens, AND-joined and
quoted) score ``1 / (1 + max(0, bm25_rank))``. Merged scores are ``0.7 · vector + 0.3 · text``;
results under 0.35 are dropped and at most ``limit`` (default 6) chunks are returned.

Faithful quirk: FTS5 ranks are negative, so every keyword match scores a text score of 1.0.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from evalloop.retrieval.fts import database_bytes, match_query
from evalloop.retrieval.types import Doc

if TYPE_CHECKING:
    from evalloop.memory.embedders import Embedder

MAX_CHARS = 1600
OVERLAP_CHARS = 320
VECTOR_WEIGHT = 0.7
TEXT_WEIGHT = 0.3
CANDIDATE_MULTIPLIER = 4
MAX_CANDIDATES = 200
DEFAULT_LIMIT = 6
MIN_SCORE = 0.35


@dataclass(frozen=True)
class Chunk:
    """A run of whole lines (1-based, inclusive) cut from one document."""

    start_line: int
    end_line: int
    text: str


@dataclass(frozen=True)
class HybridHit:
    """One returned chunk with its merged and component scores."""

    doc_id: str
    text: str
    score: float
    vector_score: float
    text_score: float
    start_line: int
    end_line: int


def chunk_markdown(text: str, max_chars: int = MAX_CHARS, overlap: int = OVERLAP_CHARS) -> list[Chunk]:
    """Cut ``text`` into chunks of whole lines of at most ``max_chars`` (+1 per newline).

    A line longer than ``max_chars`` is split into pieces. When a chunk is full, its trailing
    lines totalling at most ``overlap`` characters start the next chunk.
    """
    pending: list[tuple[int, str]] = []
    size = 0
    chunks: list[Chunk] = []

    def flush() -> None:
        if pending:
            body = "\n".join(s for _, s in pending)
            chunks.append(Chunk(pending[0][0], pending[-1][0], body))

    for lineno, line in enumerate(text.split("\n"), start=1):
        pieces = [line[i : i + max_chars] for i in range(0, len(line), max_chars)] or [""]
        for piece in pieces:
            cost = len(piece) + 1
            if pending and size + cost > max_chars:
                flush()
                kept: list[tuple[int, str]] = []
                carried = 0
                for item in reversed(pending):
                    carried += len(item[1]) + 1
                    if carried > overlap:
                        break
                    kept.insert(0, item)
                pending = kept
                size = sum(len(s) + 1 for _, s in pending)
            pending.append((lineno, piece))
            size += cost
    flush()
    return [c for c in chunks if c.text.strip()]


def text_score(rank: float) -> float:
    """OpenClaw's BM25 normalisation: ``1 / (1 + max(0, rank))`` (non-finite ranks count 999)."""
    r = max(0.0, rank) if np.isfinite(rank) else 999.0
    return 1.0 / (1.0 + r)


class OpenClawHybridRetriever:
    """The OpenClaw built-in memory search, reimplemented over an :class:`Embedder`."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        limit: int | None = DEFAULT_LIMIT,
        min_score: float = MIN_SCORE,
        vector_weight: float = VECTOR_WEIGHT,
        text_weight: float = TEXT_WEIGHT,
        candidate_multiplier: int = CANDIDATE_MULTIPLIER,
        max_chars: int = MAX_CHARS,
        overlap_chars: int = OVERLAP_CHARS,
        batch_size: int = 256,
        name: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.limit = limit
        self.min_score = min_score
        self.vector_weight = vector_weight
        self.text_weight = text_weight
        self.candidate_multiplier = candidate_multiplier
        self.max_chars = max_chars
        self.overlap_chars = overlap_chars
        self.batch_size = batch_size
        self.name = name or f"openclaw-hybrid[{getattr(embedder, 'name', 'embedder')}]"
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._chunks: list[tuple[str, Chunk]] = []
        self._vectors = np.zeros((0, int(getattr(embedder, "dim", 0) or 0)), dtype=np.float32)

    def build_index(self, corpus: list[Doc]) -> None:
        self._chunks = [
            (doc.key, chunk)
            for doc in corpus
            for chunk in chunk_markdown(doc.content, self.max_chars, self.overlap_chars)
        ]
        self._conn.execute("DROP TABLE IF EXISTS chunks_fts")
        self._conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(text, chunk UNINDEXED)")
        self._conn.executemany(
            "INSERT INTO chunks_fts (text, chunk) VALUES (?, ?)",
            [(c.text, i) for i, (_, c) in enumerate(self._chunks)],
        )
        self._conn.commit()
        texts = [c.text for _, c in self._chunks]
        parts = [
            np.asarray(self.embedder.embed(texts[i : i + self.batch_size]), dtype=np.float32)
            for i in range(0, len(texts), self.batch_size)
        ]
        self._vectors = np.vstack(parts) if parts else self._vectors

    def search(self, query: str, limit: int | None = None) -> list[HybridHit]:
        """Merged, thresholded chunk hits for ``query``, best first."""
        limit = limit or self.limit or DEFAULT_LIMIT
        if not self._chunks:
            return []
        candidates = min(MAX_CANDIDATES, max(1, int(limit * self.candidate_multiplier)))
        vec_scores: dict[int, float] = {}
        if self._vectors.shape[0]:
            q = np.asarray(self.embedder.embed([query]), dtype=np.float32)[0]
            sims = self._vectors @ q
            n = min(candidates, sims.size)
            top = np.argpartition(-sims, n - 1)[:n]
            vec_scores = {int(i): float(sims[i]) for i in top}
        txt_scores: dict[int, float] = {}
        match = match_query(query, "AND", ascii_only=True)
        if match is not None:
            rows = self._conn.execute(
                "SELECT chunk, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
                (match, candidates),
            ).fetchall()
            txt_scores = {int(i): text_score(float(rank)) for i, rank in rows}
        merged = []
        for i in set(vec_scores) | set(txt_scores):
            v, t = vec_scores.get(i, 0.0), txt_scores.get(i, 0.0)
            merged.append((self.vector_weight * v + self.text_weight * t, v, t, i))
        merged.sort(key=lambda m: (-m[0], m[3]))
        hits = []
        for score, v, t, i in merged:
            if score < self.min_score:
                continue
            doc_id, chunk = self._chunks[i]
            hits.append(HybridHit(doc_id, chunk.text, score, v, t, chunk.start_line, chunk.end_line))
            if len(hits) >= limit:
                break
        return hits

    def search_texts(self, query: str, k: int) -> list[str]:
        """The returned chunks' text (what would be injected into a prompt)."""
        return [h.text for h in self.search(query, self._cap(k))]

    def retrieve(self, query: str, k: int) -> list[str]:
        """Doc ids of the returned chunks, first occurrence kept."""
        hits = self.search(query, self._cap(k))
        return list(dict.fromkeys(h.doc_id for h in hits))

    def _cap(self, k: int) -> int:
        return min(k, self.limit) if self.limit else k

    def index_size_bytes(self) -> int:
        return database_bytes(self._conn) + int(self._vectors.nbytes)

    def close(self) -> None:
        self._conn.close()
