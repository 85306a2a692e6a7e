"""Substring-relevance scoring of result texts: hits, MRR, nDCG, change awareness, null FPR.

A result is relevant when any expected substring occurs in it (case-insensitive). Queries are
scored from the texts a system returned, so chunk- and fact-granular systems compare directly;
relevance density and token spend expose the advantage large chunks get from substring matching.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from evalloop.retrieval.types import Doc, RetrieverLike, as_retriever

QuerySet = Literal["standard", "old_memory", "adversarial", "current_state", "change_awareness", "null"]
TextSearch = Callable[[str, int], Sequence[str]]
CHARS_PER_TOKEN = 4
RANKED_SETS = ("standard", "old_memory", "adversarial")  # the sets the headline metrics average


class SubstringQuery(BaseModel):
    """A query judged by expected substrings (or old/new keywords for change detection)."""

    query_id: str
    text: str
    set: QuerySet
    expected: list[str] = Field(default_factory=list)
    old_keywords: list[str] = Field(default_factory=list)
    new_keywords: list[str] = Field(default_factory=list)
    difficulty: str | None = None
    kind: str | None = None
    min_week: int = 0

    @property
    def scorable(self) -> bool:
        """False for queries with nothing to find (adversarial N/A); null queries are scorable."""
        return self.set == "null" or bool(self.expected or self.new_keywords)


class SubstringQueryResult(BaseModel):
    """Per-query outcome; ``None`` fields do not apply to the query's set."""

    query_id: str
    set: QuerySet
    n_results: int
    first_hit_rank: int | None
    rr: float
    hit_at: dict[int, float]
    precision_at_5: float
    ndcg_at_5: float
    density: float | None
    tokens: float
    change_aware: bool | None = None
    current_correct: bool | None = None
    false_positive: bool | None = None


def is_relevant(text: str, expected: Iterable[str]) -> bool:
    """Whether any expected substring occurs in ``text``, ignoring case."""
    low = text.lower()
    return any(s.lower() in low for s in expected if s)


def density(text: str, expected: Iterable[str]) -> float:
    """Characters of expected substrings found (every occurrence) over the text's length."""
    if not text:
        return 0.0
    low = text.lower()
    found = sum(low.count(s.lower()) * len(s) for s in set(expected) if s)
    return min(1.0, found / len(text))


def relevant_density(texts: Sequence[str], expected: Iterable[str]) -> float | None:
    """Mean :func:`density` of the results holding an expected substring; None when none does."""
    wanted = list(expected)
    dens = [density(t, wanted) for t in texts if is_relevant(t, wanted)]
    return float(np.mean(dens)) if dens else None


def token_spend(texts: Sequence[str]) -> float:
    """Approximate tokens of the returned texts (characters / 4), what a prompt would pay."""
    return sum(len(t) for t in texts) / CHARS_PER_TOKEN


def score_query(q: SubstringQuery, texts: Sequence[str], ks: Sequence[int] = (1, 3, 5)) -> SubstringQueryResult:
    """Score one query's ranked result texts."""
    expected = q.expected or q.old_keywords + q.new_keywords
    rel = [is_relevant(t, expected) for t in texts]
    first = next((i + 1 for i, r in enumerate(rel) if r), None)
    top5 = rel[:5]
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(top5) if r)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(sum(top5)))
    res = SubstringQueryResult(
        query_id=q.query_id,
        set=q.set,
        n_results=len(texts),
        first_hit_rank=first,
        rr=1.0 / first if first else 0.0,
        hit_at={k: float(first is not None and first <= k) for k in ks},
        precision_at_5=sum(top5) / 5.0,
        ndcg_at_5=dcg / idcg if idcg else 0.0,
        density=relevant_density(texts, expected),
        tokens=token_spend(texts),
    )
    if q.set == "change_awareness":
        res.change_aware = change_aware(texts, q.old_keywords, q.new_keywords)
    elif q.set == "current_state":
        res.current_correct = current_state_correct(texts, q.old_keywords, q.new_keywords)
    elif q.set == "null":
        res.false_positive = len(texts) > 0
    return res


def change_aware(texts: Sequence[str], old: Iterable[str], new: Iterable[str]) -> bool:
    """Both an old-only and a new-only keyword occur somewhere in the combined results."""
    combined = "\n".join(texts)
    return is_relevant(combined, old) and is_relevant(combined, new)


def current_state_correct(texts: Sequence[str], old: Iterable[str], new: Iterable[str]) -> bool:
    """The latest fact is returned and ranks above any result mentioning only the old state."""
    old, new = list(old), list(new)
    for t in texts:
        if is_relevant(t, new):
            return True
        if is_relevant(t, old):
            return False
    return False


class SubstringReport(BaseModel):
    """Aggregates per query set plus the per-query records (for CIs and paired tests)."""

    k: int
    metrics: dict[str, float | None]
    per_set: dict[str, dict[str, float | None]]
    results: list[SubstringQueryResult]

    def per_query(self, field: str) -> dict[str, float]:
        """``query_id -> value`` of a numeric per-query field (``rr``, ``precision_at_5``, …)."""
        return {r.query_id: float(getattr(r, field) or 0.0) for r in self.results}


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _ir(rows: Sequence[SubstringQueryResult]) -> dict[str, float | None]:
    out: dict[str, float | None] = {"n": float(len(rows)), "mrr": _mean([r.rr for r in rows])}
    if rows:
        for kk in rows[0].hit_at:
            out[f"recall@{kk}"] = _mean([r.hit_at[kk] for r in rows])
    out["precision@5"] = _mean([r.precision_at_5 for r in rows])
    out["ndcg@5"] = _mean([r.ndcg_at_5 for r in rows])
    out["relevance_density"] = _mean([r.density for r in rows])
    out["tokens_per_query"] = _mean([r.tokens for r in rows])
    return out


def score_results(queries: Sequence[SubstringQuery], results: Mapping[str, Sequence[str]],
                  k: int = 5) -> SubstringReport:
    """Score result texts already collected (``query_id -> texts``) for every scorable query."""
    rows = [score_query(q, list(results.get(q.query_id, []))[:k]) for q in queries if q.scorable]
    by_set: dict[str, list[SubstringQueryResult]] = {}
    for r in rows:
        by_set.setdefault(r.set, []).append(r)
    per_set = {s: _ir(rs) for s, rs in sorted(by_set.items())}
    ranked = [r for r in rows if r.set in RANKED_SETS]
    metrics = _ir(ranked)
    metrics.update(
        old_memory_recall_at_5=_mean([r.hit_at[5] for r in by_set.get("old_memory", [])]),
        adversarial_hit_rate=_mean([r.hit_at[5] for r in by_set.get("adversarial", [])]),
        current_state_accuracy=_mean([float(bool(r.current_correct)) for r in by_set.get("current_state", [])]),
        change_awareness=_mean([float(bool(r.change_aware)) for r in by_set.get("change_awareness", [])]),
        null_false_positive_rate=_mean([float(bool(r.false_positive)) for r in by_set.get("null", [])]),
    )
    return SubstringReport(k=k, metrics=metrics, per_set=per_set, results=rows)


def run_substring_queries(search: TextSearch, queries: Sequence[SubstringQuery], k: int = 5) -> SubstringReport:
    """Ask ``search(text, k)`` for every scorable query and score the returned texts."""
    results = {q.query_id: list(search(q.text, k)) for q in queries if q.scorable}
    return score_results(queries, results, k)


def text_search(retriever: RetrieverLike, corpus: Sequence[Doc]) -> TextSearch:
    """A ``TextSearch`` for a retriever: its ``search_texts`` if any, else ids mapped to content."""
    r = as_retriever(retriever)
    native = getattr(r, "search_texts", None)
    if callable(native):
        return native
    by_id = {d.key: d.content for d in corpus}

    def search(query: str, k: int) -> list[str]:
        return [by_id[str(i)] for i in r.retrieve(query, k) if str(i) in by_id]

    return search
