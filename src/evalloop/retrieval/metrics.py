"""IR metrics over ranked runs: recall@k, precision@k, hit@k, nDCG@k and MRR, vectorised in NumPy.

Conventions follow ``trec_eval``: a document is relevant when its grade is >= ``relevance_level``;
recall divides by all relevant documents in the qrels; precision@k divides by k even when fewer
were retrieved; nDCG@k uses the grade as gain with a log2(rank + 1) discount and an ideal ranking
built from all judged grades; MRR is the reciprocal rank of the first relevant document.
A run given as ``{doc_id: score}`` is ranked by score descending, ties by doc id descending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

DEFAULT_KS: tuple[int, ...] = (1, 5, 10)
FAMILIES = ("recall", "precision", "hit", "ndcg", "mrr")


@dataclass(frozen=True)
class MetricTable:
    """Per-query metric values, aligned with ``query_ids``; means are macro-averages."""

    query_ids: list[str]
    values: dict[str, np.ndarray]

    @property
    def names(self) -> list[str]:
        return list(self.values)

    def mean(self) -> dict[str, float]:
        """Macro-average of every metric over all queries (0.0 when there are none)."""
        return {m: float(v.mean()) if v.size else 0.0 for m, v in self.values.items()}

    def per_query(self, metric: str) -> dict[str, float]:
        """``query_id -> value`` for one metric."""
        return dict(zip(self.query_ids, self.values[metric].tolist(), strict=True))

    def by_group(self, groups: Mapping[str, str]) -> dict[str, dict[str, float]]:
        """Macro-averages per group (e.g. stratum); queries without a group go to ``"all"``."""
        labels = np.array([groups.get(q, "all") for q in self.query_ids], dtype=object)
        out: dict[str, dict[str, float]] = {}
        for g in sorted(set(labels.tolist())):
            mask = labels == g
            out[g] = {m: float(v[mask].mean()) for m, v in self.values.items()}
        return out


def metric_names(ks: Iterable[int] = DEFAULT_KS, families: Iterable[str] = FAMILIES) -> list[str]:
    """The metric names ``evaluate`` produces, e.g. ``recall@5``, ``ndcg@10``, ``mrr``."""
    fams = list(families)
    names = [f"{f}@{k}" for f in fams if f != "mrr" for k in ks]
    return names + (["mrr"] if "mrr" in fams else [])


def _ranked(docs: Sequence[str | int] | Mapping[str, float]) -> list[str]:
    if isinstance(docs, Mapping):
        by_id = sorted(docs.items(), key=lambda kv: str(kv[0]), reverse=True)
        by_id.sort(key=lambda kv: -float(kv[1]))
        ranked = [str(d) for d, _ in by_id]
    else:
        ranked = [d if isinstance(d, str) else str(d) for d in docs]
    return list(dict.fromkeys(ranked))


def evaluate(
    run: Mapping[str, Sequence[str | int] | Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Iterable[int] = DEFAULT_KS,
    *,
    families: Iterable[str] = FAMILIES,
    relevance_level: int = 1,
) -> MetricTable:
    """Score every query of ``qrels`` (a query absent from ``run`` scores 0 everywhere)."""
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError("cutoffs must be positive integers")
    fams = set(families)
    qids = [str(q) for q in qrels]
    n = len(qids)
    ranked = [_ranked(run.get(q, ())) for q in qids]
    lengths = np.fromiter((len(r) for r in ranked), dtype=np.int64, count=n)
    width = max(int(lengths.max()) if n else 0, ks[-1])

    # Scatter each retrieved document's grade into a (queries x width) matrix.
    flat = np.fromiter(
        chain.from_iterable(map(qrels[q].get, r, repeat(0)) for q, r in zip(qids, ranked, strict=True)),
        dtype=np.float64,
        count=int(lengths.sum()),
    )
    rows = np.repeat(np.arange(n), lengths)
    starts = np.cumsum(lengths) - lengths
    cols = np.arange(flat.size) - np.repeat(starts, lengths)
    grades = np.zeros((n, width))
    grades[rows, cols] = flat

    relevant = grades >= relevance_level
    hits = np.cumsum(relevant, axis=1)
    num_rel = np.fromiter(
        (sum(1 for g in qrels[q].values() if g >= relevance_level) for q in qids),
        dtype=np.float64,
        count=n,
    )
    safe_rel = np.where(num_rel > 0, num_rel, 1.0)
    values: dict[str, np.ndarray] = {}
    for fam in ("recall", "precision", "hit"):
        if fam not in fams:
            continue
        for k in ks:
            h = hits[:, k - 1].astype(np.float64)
            if fam == "recall":
                values[f"recall@{k}"] = np.where(num_rel > 0, h / safe_rel, 0.0)
            elif fam == "precision":
                values[f"precision@{k}"] = h / k
            else:
                values[f"hit@{k}"] = (h > 0).astype(np.float64)
    if "ndcg" in fams:
        discount = 1.0 / np.log2(np.arange(2, width + 2))
        gains = np.maximum(grades, 0.0) * discount
        kmax = ks[-1]
        ideal = np.zeros((n, kmax))
        for i, q in enumerate(qids):
            top = sorted((g for g in qrels[q].values() if g > 0), reverse=True)[:kmax]
            ideal[i, : len(top)] = top
        ideal_gains = np.cumsum(ideal * discount[:kmax], axis=1)
        dcg = np.cumsum(gains[:, :kmax], axis=1)
        for k in ks:
            idcg = ideal_gains[:, k - 1]
            values[f"ndcg@{k}"] = np.where(idcg > 0, dcg[:, k - 1] / np.where(idcg > 0, idcg, 1.0), 0.0)
    if "mrr" in fams:
        first = relevant.argmax(axis=1)
        found = relevant.any(axis=1)
        values["mrr"] = np.where(found, 1.0 / (first + 1.0), 0.0)
    ordered = {m: values[m] for m in metric_names(ks, FAMILIES) if m in values}
    return MetricTable(query_ids=qids, values=ordered)
