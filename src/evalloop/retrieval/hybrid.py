"""Reference hybrid retriever in the OpenClaw style: line chunks, vector + FTS5, merged.

Documents are cut into line-based chunks (1600 characters, 320 characters of overlap); each chunk
is embedded and indexed in FTS5. A query takes ``4 × limit`` candidates from each side.

Two calibrations ship:

- **seed-faithful** (``hybrid-seed000``, :meth:`OpenClawHybridRetriever.seed_faithful`): keyword
  candidates must contain *all* query tokens (AND), score ``1 / (1 + max(0, bm25_rank))`` —
  FTS5 ranks are negative, so every match scores 1.0 — merged as ``0.7 · cosine + 0.3 · text``,
  results under an absolute 0.35 dropped, at most 6 chunks. The floor was tuned for an 8B
  embedding model on long chunks; the shipped 256-dimension static embedder rarely reaches it.
- **calibrated** (the default, ``hybrid``): keyword candidates match *any* query token (OR) and
  are ranked by BM25; both lists are merged by weighted reciprocal rank fusion
  (``0.7 / (60 + vector rank) + 0.3 / (60 + text rank)``), so no score needs to clear a floor the
  embedder cannot reach. ``fusion="weighted"`` keeps the weighted sum but grades text scores
  (``bm25 / best bm25``) and ``min_score`` may then be given relative to the best hit
  (``relative_floor``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

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
RRF_K = 60


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
    """The OpenClaw built-in memory search, reimplemented over an :class:`Embedder`.

    Constructed directly it keeps the seed's constants; :meth:`calibrated` (the ``hybrid``
    retriever of suites) and :meth:`seed_faithful` (``hybrid-seed000``) are the two presets.
    """

    @classmethod
    def seed_faithful(cls, embedder: Embedder, **options: Any) -> OpenClawHybridRetriever:
        """Seed 000's constants: AND query, ``1/(1+max(0,rank))``, floor 0.35, 6 results."""
        options.setdefault("name", f"openclaw-seed000[{getattr(embedder, 'name', 'embedder')}]")
        return cls(embedder, **options)

    @classmethod
    def calibrated(cls, embedder: Embedder, **options: Any) -> OpenClawHybridRetriever:
        """OR query ranked by BM25, weighted rank fusion, no absolute floor, ``k`` results."""
        preset: dict[str, Any] = {"operator": "OR", "fusion": "rrf", "graded_text": True,
                                  "min_score": 0.0, "limit": None}
        return cls(embedder, **{**preset, **options})

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
        operator: Literal["AND", "OR"] = "AND",
        fusion: Literal["weighted", "rrf"] = "weighted",
        graded_text: bool = False,
        relative_floor: float = 0.0,
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
        self.operator, self.fusion, self.graded_text = operator, fusion, graded_text
        self.relative_floor = relative_floor
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
            sims = np.einsum("ij,j->i", self._vectors, q)  # not BLAS: see memory.vectors.similarities
            n = min(candidates, sims.size)
            top = np.argpartition(-sims, n - 1)[:n]
            vec_scores = {int(i): float(sims[i]) for i in top}
        txt_scores: dict[int, float] = {}
        match = match_query(query, self.operator, ascii_only=True)
        if match is not None:
            rows = self._conn.execute(
                "SELECT chunk, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
                (match, candidates),
            ).fetchall()
            txt_scores = self._text_scores([(int(i), float(rank)) for i, rank in rows])
        merged = self._merge(vec_scores, txt_scores)
        floor = max(self.min_score, self.relative_floor * merged[0][0] if merged else 0.0)
        hits = []
        for score, v, t, i in merged:
            if score < floor:
                continue
            doc_id, chunk = self._chunks[i]
            hits.append(HybridHit(doc_id, chunk.text, score, v, t, chunk.start_line, chunk.end_line))
            if len(hits) >= limit:
                break
        return hits

    def _text_scores(self, rows: list[tuple[int, float]]) -> dict[int, float]:
        """Seed: ``1/(1+max(0,rank))`` (1.0 for every match). Graded: ``bm25 / best bm25``."""
        if not self.graded_text:
            return {i: text_score(rank) for i, rank in rows}
        best = max((-rank for _, rank in rows), default=0.0)
        return {i: (-rank / best if best > 0 else 1.0) for i, rank in rows}

    def _merge(self, vec: dict[int, float], txt: dict[int, float]) -> list[tuple[float, float, float, int]]:
        """``(score, vector, text, chunk)`` best first, by weighted sum or weighted rank fusion."""
        if self.fusion == "rrf":
            v_rank = {i: r for r, i in enumerate(sorted(vec, key=lambda i: (-vec[i], i)), start=1)}
            t_rank = {i: r for r, i in enumerate(sorted(txt, key=lambda i: (-txt[i], i)), start=1)}

            def fused(i: int) -> float:
                return (self.vector_weight / (RRF_K + v_rank[i]) if i in v_rank else 0.0) + (
                    self.text_weight / (RRF_K + t_rank[i]) if i in t_rank else 0.0)
        else:
            def fused(i: int) -> float:
                return self.vector_weight * vec.get(i, 0.0) + self.text_weight * txt.get(i, 0.0)
        merged = [(fused(i), vec.get(i, 0.0), txt.get(i, 0.0), i) for i in set(vec) | set(txt)]
        merged.sort(key=lambda m: (-m[0], m[3]))
        return merged

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
