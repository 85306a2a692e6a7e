"""Side-by-side comparison: the same dataset against several retrievers, one row each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel

from evalloop.retrieval.dataset import Dataset
from evalloop.retrieval.metrics import DEFAULT_KS
from evalloop.retrieval.retriever_eval import RetrievalResult, run_retriever
from evalloop.retrieval.types import RetrieverLike


class ComparisonRow(BaseModel):
    """One retriever's line of the comparison table."""

    retriever: str
    metrics: dict[str, float]
    per_stratum: dict[str, dict[str, float]]
    latency_p50_ms: float
    latency_p95_ms: float
    build_s: float | None
    index_bytes: int | None


class Comparison(BaseModel):
    """Rows for one table plus the full results (per-query values for significance tests)."""

    dataset: str
    metrics: list[str]
    rows: list[ComparisonRow]
    results: dict[str, RetrievalResult]

    def best(self, metric: str) -> str:
        """The retriever with the highest mean on ``metric``."""
        return max(self.rows, key=lambda r: r.metrics[metric]).retriever

    def table(self, metrics: Iterable[str] | None = None) -> str:
        """A plain-text table (the CLI renders its own)."""
        cols = list(metrics) if metrics is not None else self.metrics
        head = f"{'retriever':<22}" + "".join(f"{m:>12}" for m in cols) + f"{'p50 ms':>10}"
        lines = [head]
        for row in self.rows:
            cells = "".join(f"{row.metrics[m]:>12.4f}" for m in cols)
            lines.append(f"{row.retriever:<22}{cells}{row.latency_p50_ms:>10.2f}")
        return "\n".join(lines)


def compare(
    retrievers: Mapping[str, RetrieverLike],
    dataset: Dataset,
    *,
    k: int = 20,
    ks: Iterable[int] = DEFAULT_KS,
) -> Comparison:
    """Run every retriever (each builds its own index) on ``dataset`` and tabulate the metrics."""
    ks = tuple(ks)
    results: dict[str, RetrievalResult] = {}
    rows: list[ComparisonRow] = []
    for label, retriever in retrievers.items():
        res = run_retriever(retriever, dataset, k=k, ks=ks, name=label)
        results[label] = res
        rows.append(
            ComparisonRow(
                retriever=label,
                metrics=res.overall,
                per_stratum=res.per_stratum,
                latency_p50_ms=res.latency_p50_ms,
                latency_p95_ms=res.latency_p95_ms,
                build_s=res.build_s,
                index_bytes=res.index_bytes,
            )
        )
    names = list(rows[0].metrics) if rows else []
    return Comparison(dataset=dataset.name, metrics=names, rows=rows, results=results)
