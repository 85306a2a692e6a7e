"""One retriever evaluated on a dataset: index build, timed queries, metrics and strata
(:class:`RetrievalResult`; :func:`run_retriever`)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, Field

from evalloop.errors import TargetError
from evalloop.retrieval.dataset import Dataset
from evalloop.retrieval.metrics import DEFAULT_KS, MetricTable, evaluate
from evalloop.retrieval.types import Doc, Retriever, RetrieverLike, Run, as_retriever, retriever_name


class RetrievalResult(BaseModel):
    """One retriever on one dataset: macro-averaged metrics, per-query values and costs."""

    retriever: str
    dataset: str
    k: int
    n_queries: int
    overall: dict[str, float]
    per_stratum: dict[str, dict[str, float]]
    query_ids: list[str]
    strata: list[str]
    per_query: dict[str, list[float]] = Field(description="metric -> values aligned with query_ids")
    run: Run = Field(default_factory=dict, description="query_id -> ranked doc ids returned")
    latency_ms: list[float] = Field(default_factory=list)
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0
    build_s: float | None = None
    index_bytes: int | None = None

    def scores(self, metric: str) -> dict[str, float]:
        """``query_id -> value`` for one metric (per-case scores for baselines and tests)."""
        return dict(zip(self.query_ids, self.per_query[metric], strict=True))

    def summary(self) -> str:
        """A small plain-text table: overall and one row per stratum."""
        metrics = list(self.overall)
        lines = [f"{self.retriever} on {self.dataset} ({self.n_queries} queries)"]
        lines.append(" ".join([f"{'stratum':<14}"] + [f"{m:>12}" for m in metrics]))
        rows = [("overall", self.overall), *sorted(self.per_stratum.items())]
        for label, vals in rows:
            lines.append(" ".join([f"{label:<14}"] + [f"{vals[m]:>12.4f}" for m in metrics]))
        lines.append(
            f"latency p50 {self.latency_p50_ms:.2f} ms, p95 {self.latency_p95_ms:.2f} ms; "
            f"build {self.build_s if self.build_s is not None else '-'} s; "
            f"index {self.index_bytes if self.index_bytes is not None else '-'} bytes"
        )
        return "\n".join(lines)


class HasCorpus(Protocol):
    """What :func:`build_index` reads of a dataset: its documents (a :class:`Dataset`, or a slice of one)."""

    @property
    def corpus(self) -> Sequence[Doc]: ...


def build_index(retriever: Any, dataset: HasCorpus) -> tuple[float | None, int | None]:
    """Call the optional ``build_index`` hook (timed) and ``index_size_bytes``."""
    build_s = None
    hook = getattr(retriever, "build_index", None)
    if callable(hook):
        start = time.perf_counter()
        hook(list(dataset.corpus))
        build_s = time.perf_counter() - start
    size_hook = getattr(retriever, "index_size_bytes", None)
    index_bytes = int(size_hook()) if callable(size_hook) else None
    return build_s, index_bytes


def run_retriever(
    retriever: RetrieverLike,
    dataset: Dataset,
    *,
    k: int = 20,
    ks: Iterable[int] = DEFAULT_KS,
    name: str | None = None,
    build: bool = True,
) -> RetrievalResult:
    """Build the index, query every dataset query for ``k`` ids and score the run.

    ``k`` must be at least the largest cutoff. A retriever that raises ends the run with a
    :class:`TargetError` naming the query.
    """
    ks = tuple(sorted(set(ks)))
    if k < ks[-1]:
        raise ValueError(f"k={k} is below the largest metric cutoff {ks[-1]}")
    if dataset.scoped:
        raise TargetError(f"dataset {dataset.name!r} is scoped: one retriever would search every "
                          "scope's documents at once",
                          hint="use evalloop.retrieval.retrievers.run_scoped(factory, dataset): "
                               "one fresh retriever per scope")
    label = name or retriever_name(retriever)
    r: Retriever = as_retriever(retriever)
    build_s, index_bytes = build_index(r, dataset) if build else (None, None)

    run: Run = {}
    latencies: list[float] = []
    for q in dataset.queries:
        start = time.perf_counter()
        try:
            ids = r.retrieve(q.text, k)
        except Exception as exc:  # a failing system under test, reported with its query
            raise TargetError(
                f"retriever raised {type(exc).__name__}: {exc}",
                where=f"{label}, query {q.query_id!r}",
                hint="fix the retriever or drop the query",
            ) from exc
        latencies.append((time.perf_counter() - start) * 1000.0)
        run[q.query_id] = list(dict.fromkeys(str(i) for i in ids))[:k]
    return result_from_run(
        run,
        dataset,
        ks=ks,
        k=k,
        name=label,
        latency_ms=latencies,
        build_s=build_s,
        index_bytes=index_bytes,
    )


def result_from_run(
    run: Run,
    dataset: Dataset,
    *,
    ks: Iterable[int] = DEFAULT_KS,
    k: int = 20,
    name: str = "run",
    latency_ms: list[float] | None = None,
    build_s: float | None = None,
    index_bytes: int | None = None,
) -> RetrievalResult:
    """Score an existing run (e.g. loaded from history) against a dataset."""
    qrels = {q.query_id: dataset.qrels[q.query_id] for q in dataset.queries}
    table: MetricTable = evaluate(run, qrels, ks)
    strata = dataset.strata()
    lat = np.asarray(latency_ms or [], dtype=np.float64)
    return RetrievalResult(
        retriever=name,
        dataset=dataset.name,
        k=k,
        n_queries=len(table.query_ids),
        overall=table.mean(),
        per_stratum=table.by_group(strata),
        query_ids=table.query_ids,
        strata=[strata[q] for q in table.query_ids],
        per_query={m: v.tolist() for m, v in table.values.items()},
        run=run,
        latency_ms=lat.tolist(),
        latency_p50_ms=float(np.percentile(lat, 50)) if lat.size else 0.0,
        latency_p95_ms=float(np.percentile(lat, 95)) if lat.size else 0.0,
        build_s=build_s,
        index_bytes=index_bytes,
    )
