"""run_retriever and compare: hooks, latency, per-stratum metrics, per-query values."""

from __future__ import annotations

import time

import pytest

from evalloop.errors import TargetError
from evalloop.retrieval import Dataset, Doc, Query, compare, run_retriever
from evalloop.retrieval.reference_retrievers import Fts5Bm25Retriever


def small_dataset() -> Dataset:
    docs = [
        Doc(id=1, content="the cat sat on the mat"),
        Doc(id=2, content="dogs chase cats in the park"),
        Doc(id=3, content="quarterly revenue grew by ten percent"),
        Doc(id=4, content="the revenue report is due friday"),
    ]
    queries = [
        Query(query_id="e1", text="cat mat", stratum="exact"),
        Query(query_id="e2", text="revenue report", stratum="exact"),
        Query(query_id="p1", text="feline resting upon rug", stratum="paraphrase"),
    ]
    qrels = {"e1": {"1": 1}, "e2": {"4": 2, "3": 1}, "p1": {"1": 1}}
    return Dataset(corpus=docs, queries=queries, qrels=qrels, name="tiny")


class Indexed:
    name = "indexed"

    def __init__(self) -> None:
        self.docs: list[Doc] = []

    def build_index(self, corpus: list[Doc]) -> None:
        time.sleep(0.01)
        self.docs = corpus

    def index_size_bytes(self) -> int:
        return sum(len(d.content) for d in self.docs)

    def retrieve(self, query: str, k: int) -> list[int]:
        words = set(query.split())
        scored = sorted(self.docs, key=lambda d: -len(words & set(d.content.split())))
        return [int(d.id) for d in scored[:k]]


def test_hooks_latency_and_strata() -> None:
    res = run_retriever(Indexed(), small_dataset(), k=10)
    assert res.retriever == "indexed"
    assert res.build_s is not None and res.build_s >= 0.01
    assert res.index_bytes == sum(len(d.content) for d in small_dataset().corpus)
    assert len(res.latency_ms) == 3 and res.latency_p95_ms >= res.latency_p50_ms >= 0
    assert res.run["e1"][0] == "1"  # ids normalised to str
    assert res.scores("mrr")["e1"] == 1.0
    assert set(res.per_stratum) == {"exact", "paraphrase"}
    assert res.per_stratum["exact"]["mrr"] == 1.0
    assert res.overall["mrr"] == pytest.approx((1 + 1 + res.scores("mrr")["p1"]) / 3)
    assert "paraphrase" in res.summary()


def test_bare_callable_and_failures() -> None:
    def lookup(query: str, k: int) -> list[str]:
        return ["4", "3"] if "revenue" in query else []

    res = run_retriever(lookup, small_dataset(), k=10)
    assert res.build_s is None and res.index_bytes is None
    assert res.scores("ndcg@5") == {"e1": 0.0, "e2": 1.0, "p1": 0.0}

    def broken(query: str, k: int) -> list[str]:
        raise RuntimeError("index offline")

    with pytest.raises(TargetError, match="index offline") as info:
        run_retriever(broken, small_dataset())
    assert "e1" in info.value.where
    with pytest.raises(ValueError, match="cutoff"):
        run_retriever(lookup, small_dataset(), k=5, ks=(1, 10))


def test_compare_side_by_side() -> None:
    ds = small_dataset()
    table = compare({"fts": Fts5Bm25Retriever(), "overlap": Indexed()}, ds, k=10)
    assert [r.retriever for r in table.rows] == ["fts", "overlap"]
    assert table.rows[0].index_bytes and table.rows[0].index_bytes > 0
    fts = table.results["fts"]
    assert fts.scores("hit@1")["e1"] == 1.0 and fts.scores("hit@1")["p1"] == 0.0
    assert table.best("hit@1") in {"fts", "overlap"}
    assert "recall@5" in table.table()
