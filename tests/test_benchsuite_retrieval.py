"""Retrieval datasets as ordinary suites: shipped suites on real SQLite history, strata, stats."""

from __future__ import annotations

import pytest

from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.loop.pipeline import run_suite
from evalloop.report.strata import latency_summary, strata_means
from evalloop.retrieval import Fts5Bm25Retriever, run_retriever
from evalloop.retrieval.dataset_cases import dataset_cases
from evalloop.retrieval.suite_data import retrieval_dataset
from evalloop.retrieval.suite_targets import (
    MemoryStoreRetriever,
    RetrieverTarget,
    record_target_stats,
    retriever_factory,
    target_stats,
)
from evalloop.retrieval.types import Doc
from evalloop.scoring.registry import discover
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import PACKAGE_FIXTURES

BENCH = PACKAGE_FIXTURES / "data" / "memory-bench"


@pytest.fixture
def settings(tmp_path):
    return load_settings(tmp_path)


def test_dataset_cases_follow_the_001_schema():
    cases = list(dataset_cases(BENCH))
    ds = retrieval_dataset(BENCH)
    assert [c.id for c in cases] == [q.query_id for q in ds.queries]
    first = cases[0]
    assert set(first.input) == {"query", "stratum"} and first.tags == [first.input["stratum"]]
    assert first.expected == {"relevance": ds.qrels[first.id]}
    assert any(g == 2 for c in cases for g in c.expected["relevance"].values())  # graded qrels
    assert {c.tags[0] for c in cases} >= {"standard", "old_memory", "adversarial"}


def test_bm25_suite_matches_the_pure_benchmark_and_keeps_history(settings):
    store = HistoryStore(settings.database_url)
    report = run_suite("retrieval-bm25", settings=settings, store=store)
    run = report.executed.run
    direct = run_retriever(Fts5Bm25Retriever(), retrieval_dataset(BENCH), k=20, ks=(5, 10))
    means = {s: report.executed.summaries[s].mean for s in ("recall@5", "recall@10", "ndcg@10", "mrr@20")}
    for name, value in means.items():  # the Python API's mrr ranks k=20 deep: the suite's mrr@20
        assert value == pytest.approx(direct.overall[name.removesuffix("@20")], abs=1e-12), name
    assert run.n_cases == direct.n_queries == 86

    strata = strata_means(store, run.id, order=list(means))
    assert strata.scorers[:4] == list(means)
    for row in strata.strata:
        for name in means:
            assert row.means[name] == pytest.approx(direct.per_stratum[row.tag][name.removesuffix("@20")],
                                                    abs=1e-12)
    assert strata.overall["mrr@20"] == pytest.approx(means["mrr@20"])
    assert sum(r.n for r in strata.strata) == 86
    assert latency_summary(store, run.id)["p50_ms"] >= 0

    stats = target_stats(report.prepared.target)
    assert stats["retriever"] == "fts5-bm25" and stats["n_docs"] == 246 and stats["n_queries"] == 86
    assert stats["index_bytes"] > 10_000 and stats["build_s"] > 0
    assert 0 < stats["latency_p50_ms"] <= stats["latency_p95_ms"]
    record_target_stats(store, run.id, stats)
    assert store.get_run(run.id).notes["target_stats"]["n_docs"] == 246

    again = run_suite("retrieval-bm25", settings=settings, store=store)
    verdicts = {s.scorer: (s.verdict, s.baseline) for s in again.comparison.scorers}
    assert verdicts["mrr@20"] == ("steady", pytest.approx(means["mrr@20"]))


def test_memory_suite_beats_bm25_on_mrr(settings):
    store = HistoryStore(settings.database_url)
    bm25 = run_suite("retrieval-bm25", settings=settings, store=store).executed.summaries["mrr@20"].mean
    memory = run_suite("retrieval-memory", settings=settings, store=store)
    assert memory.executed.case_errors == 0
    assert memory.executed.summaries["mrr@20"].mean > bm25 + 0.1
    assert target_stats(memory.prepared.target)["retriever"] == "evalloop-memory"


def test_memory_retriever_returns_every_doc_of_identical_text():
    r = MemoryStoreRetriever()
    r.build_index([Doc(id=1, content="the deploy key rotates monthly"),
                   Doc(id=2, content="the deploy key rotates monthly"),
                   Doc(id=3, content="lunch is at noon in the atrium")])
    assert r.retrieve("deploy key rotation", 3)[:2] == ["1", "2"]
    assert r.index_size_bytes() > 0


def test_own_retriever_class_and_bare_callable(tmp_path, monkeypatch, settings):
    (tmp_path / "myret.py").write_text(
        "class Last:\n"
        "    def __init__(self, n=2):\n        self.n = n\n"
        "    def build_index(self, corpus):\n        self.ids = [d.key for d in corpus]\n"
        "    def retrieve(self, query, k):\n        return self.ids[-self.n:][:k]\n"
        "def none(query, k):\n    return []\n")
    monkeypatch.chdir(tmp_path)
    made = retriever_factory("myret:Last", options={"n": 3})()
    made.build_index([Doc(id=i, content=str(i)) for i in range(5)])
    assert made.retrieve("x", 10) == ["2", "3", "4"]
    suite = find_suite("retrieval-bm25", settings.project_dir)
    target = RetrieverTarget(retriever="myret:none", dataset=str(BENCH))
    assert target({"query": "anything"}) == [] and target.run_stats()["n_queries"] == 1
    from evalloop.run.runner import prepare

    prepared = prepare(suite, discover(tmp_path), target_params={"retriever": "myret:Last"})
    assert prepared.fingerprint["target_fingerprint"]["retriever"] == "myret:Last"
