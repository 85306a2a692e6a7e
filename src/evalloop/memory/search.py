"""Hybrid search over the memory file: tag filtering, full-text and vector candidates, and
weighted reciprocal rank fusion of the two lists (gated by the text match's query coverage; when
no memory holds a word of the query, only vector neighbours above a similarity floor count, so
the search can answer "nothing relevant")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalloop.memory.bm25 import int_list
from evalloop.memory.embedders import DEFAULT_EMBEDDER_NAME
from evalloop.memory.textsearch import TextSearcher
from evalloop.memory.vectors import EXACT_FILTER_LIMIT, Hit, VectorIndex

RRF_K = 20
VECTOR_WEIGHT = 0.15
TEXT_CONFIDENT_AT = 0.15
#: Per embedder (by name): the cosine similarity a vector neighbour needs when no memory holds a
#: word of the query. Below it the shipped model's neighbours of a question about something never
#: stored are as close as those of a question by meaning (``bench/fusion_weights.py``). Cosines
#: of other models are on other scales: they get no floor unless ``similarity_floor`` is set.
SIMILARITY_FLOORS = {DEFAULT_EMBEDDER_NAME: 0.55}
NO_FLOOR = -1.0


class Fusion(BaseModel):
    """How ``find`` fuses its two ranked lists: weighted reciprocal rank fusion,
    ``text_weight / (rrf_k + text rank) + vector_weight / (rrf_k + vector rank)``, gated by how
    much of the query the best text match covers: when it covers less than
    ``text_confident_at`` of the query's IDF mass (the words matched are incidental, as for a
    query by meaning), the vectors weigh as much as the text. When the text side finds nothing
    at all, a vector neighbour counts only from ``similarity_floor`` on: a search may then
    return nothing, as the text side alone does for a question about something never stored.

    The defaults were chosen by ``bench/fusion_weights.py`` on data it generates (weekly fact
    corpora and LoCoMo-format conversations, seeds other than the shipped benchmark's), never on
    a public benchmark: of the settings at least as good as the text side alone on every metric
    of every generated dataset, the one with the best mean nDCG@10. Equal weights lost to text
    alone on conversations, as on real LoCoMo. The floor was chosen by the same rule at those
    weights, null rejection counted (questions about things never stored, written for the
    calibration): the lowest floor at which the fused store answers "nothing" as often as its
    text side. A weight of 0 switches that side off (an ablation): its list is left out of the
    fusion, and with it the floor.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    text_weight: float = Field(default=1.0, ge=0.0)
    vector_weight: float = Field(default=VECTOR_WEIGHT, ge=0.0)
    rrf_k: int = Field(default=RRF_K, ge=1)
    text_confident_at: float = Field(
        default=TEXT_CONFIDENT_AT, ge=0.0, le=1.0,
        description="when the best lexical match covers less than this share of the query's "
                    "IDF mass, the text list is weak evidence and the vectors weigh as much as it")
    similarity_floor: float | None = Field(
        default=None, ge=NO_FLOOR, le=1.0,
        description="when no memory holds a word of the query, vector neighbours below this cosine "
                    "similarity are left out; None: the store's embedder's calibrated floor "
                    "(SIMILARITY_FLOORS; none for other embedders), -1: no floor")

    def weights(self, coverage: float | None) -> tuple[float, float]:
        """(text, vector) weights for a query whose best text match covers ``coverage``."""
        if coverage is not None and coverage < self.text_confident_at and self.vector_weight:
            return self.text_weight, max(self.vector_weight, self.text_weight)
        return self.text_weight, self.vector_weight

    def for_embedder(self, name: str) -> Fusion:
        """This fusion with the similarity floor of the embedder called ``name`` filled in."""
        if self.similarity_floor is not None:
            return self
        return self.model_copy(update={"similarity_floor": SIMILARITY_FLOORS.get(name, NO_FLOOR)})

    def neighbours(self, vector_hits: Sequence[Hit], text_found: bool) -> Sequence[Hit]:
        """The vector hits that count: all of them, unless the text side (fused in) found
        nothing; then those at or above the similarity floor."""
        floor = self.similarity_floor
        if text_found or not self.text_weight or floor is None or floor <= NO_FLOOR:
            return vector_hits
        return [hit for hit in vector_hits if hit[1] >= floor]

    @model_validator(mode="after")
    def _one_side(self) -> Fusion:
        if self.text_weight == 0 and self.vector_weight == 0:
            raise ValueError("text_weight and vector_weight cannot both be 0")
        return self


#: With broad tags, fetch this many times more unfiltered candidates (at most) and filter.
MAX_WIDEN = 20


class Fused(NamedTuple):
    """One fused hit, before its record is read."""

    pk: int
    score: float
    text_rank: int | None
    vector_rank: int | None
    similarity: float | None


def _marks(n: int) -> str:
    return ",".join("?" * n)


def tagged_sql(tags: Sequence[str]) -> tuple[str, list[str]]:
    """SQL selecting the pks that carry every tag in ``tags``, and its parameters. The first tag
    drives the scan (put the rarest first); the others are primary-key probes."""
    probes = "".join(
        " AND EXISTS (SELECT 1 FROM memory_tags t WHERE t.tag = ? AND t.memory_pk = t0.memory_pk)" for _ in tags[1:]
    )
    return f"SELECT t0.memory_pk FROM memory_tags t0 WHERE t0.tag = ?{probes}", list(tags)


def rrf(text_hits: Sequence[int], vector_hits: Sequence[Hit], limit: int,
        fusion: Fusion | None = None, coverage: float | None = None) -> list[Fused]:
    """Weighted reciprocal rank fusion: ``Σ weight / (k + rank)`` over the lists a pk is in;
    ``coverage`` (of the query by its best text match) sets the weights (:meth:`Fusion.weights`);
    with no text hit, only vector hits above the floor count (:meth:`Fusion.neighbours`)."""
    fusion = fusion or Fusion()
    text_weight, vector_weight = fusion.weights(coverage)
    vector_hits = fusion.neighbours(vector_hits, bool(text_hits))
    text_rank = {pk: i + 1 for i, pk in enumerate(text_hits)} if text_weight else {}
    vector_rank = {pk: i + 1 for i, (pk, _) in enumerate(vector_hits)} if vector_weight else {}
    similarity = dict(vector_hits)
    scores: dict[int, float] = {}
    for ranks, weight in ((text_rank, text_weight), (vector_rank, vector_weight)):
        for pk, rank in ranks.items():
            scores[pk] = scores.get(pk, 0.0) + weight / (fusion.rrf_k + rank)
    best = sorted(scores, key=lambda pk: (-scores[pk], -similarity.get(pk, -2.0), pk))[:limit]
    return [Fused(pk, scores[pk], text_rank.get(pk), vector_rank.get(pk), similarity.get(pk)) for pk in best]


class HybridSearcher:
    """Runs one ``find`` against a connection, its vector index and its text index."""

    def __init__(self, conn: Any, index: VectorIndex, text: TextSearcher,
                 fusion: Fusion | None = None) -> None:
        self.conn = conn
        self.index = index
        self.text = text
        self.fusion = fusion or Fusion()

    def _rrf(self, text: tuple[list[int], float | None], vector_hits: Sequence[Hit], limit: int) -> list[Fused]:
        return rrf(text[0], vector_hits, limit, self.fusion, text[1])

    def _with_tags(self, pks: Sequence[int], tags: Sequence[str]) -> set[int]:
        if not pks:
            return set()
        sql = (
            f"SELECT memory_pk FROM memory_tags WHERE tag IN ({_marks(len(tags))}) "
            f"AND memory_pk IN ({_marks(len(pks))}) "
            f"GROUP BY memory_pk HAVING count(*) = {len(tags)}"
        )
        return {r[0] for r in self.conn.execute(sql, [*tags, *pks])}

    def _counts(self, tags: Sequence[str]) -> list[tuple[int, str]]:
        """(memories carrying it, tag) for each tag, rarest first."""
        sql = f"SELECT tag, n FROM memory_tag_counts WHERE tag IN ({_marks(len(tags))})"
        known = dict(self.conn.execute(sql, list(tags)).fetchall())
        return sorted((known.get(t, 0), t) for t in tags)

    def search(self, query: str, qvec: np.ndarray, limit: int, tags: Sequence[str]) -> list[Fused]:
        pool = max(2 * limit, 20)
        if not tags:
            return self._rrf(self.text.search_covered(query, 2 * pool), self.index.search(qvec, pool, None), limit)
        counts = self._counts(tags)
        narrowest, tags = counts[0][0], [t for _, t in counts]
        if narrowest == 0:
            return []
        if narrowest > EXACT_FILTER_LIMIT:
            fused = self._post_filtered(query, qvec, limit, pool, tags, narrowest)
            if fused is not None:
                return fused
        sql, params = tagged_sql(tags)
        (pks,) = self.conn.execute(f"SELECT group_concat(memory_pk) FROM ({sql})", params).fetchone()
        if not pks:
            return []
        allowed = int_list(pks)
        text = self.text.search_covered(query, 2 * pool, allowed)
        return self._rrf(text, self.index.search(qvec, pool, allowed), limit)

    def _post_filtered(
        self, query: str, qvec: np.ndarray, limit: int, pool: int, tags: Sequence[str], n: int
    ) -> list[Fused] | None:
        """Broad tags: search unfiltered with a wider pool, then keep tagged hits. None when
        too few survive (the caller then filters first)."""
        (top,) = self.conn.execute("SELECT coalesce(max(pk), 0) FROM memories").fetchone()
        widen = min(MAX_WIDEN, max(1, math.ceil(top / n)))
        vector_hits = self.index.search(qvec, pool * widen, None)
        text_hits, coverage = self.text.search_covered(query, 2 * pool * widen)
        keep = self._with_tags(list({*text_hits, *(pk for pk, _ in vector_hits)}), tags)
        vector_hits = [h for h in vector_hits if h[0] in keep][:pool]
        if len(vector_hits) < min(limit, n):
            return None
        text_hits = [pk for pk in text_hits if pk in keep][: 2 * pool]
        return self._rrf((text_hits, coverage), vector_hits, limit)
