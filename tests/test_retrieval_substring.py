"""Substring relevance: hits, density, token spend, change awareness, current state, null FPR."""

from __future__ import annotations

import pytest

from evalloop.retrieval import Doc, Fts5Bm25Retriever, generate_corpus, to_dataset
from evalloop.retrieval.substring import (
    SubstringQuery,
    change_aware,
    current_state_correct,
    density,
    is_relevant,
    run_substring_queries,
    score_results,
    text_search,
)

OLD, NEW = ["Glasgow"], ["Reykjavik"]


def test_relevance_and_density() -> None:
    assert is_relevant("Went for a RUN today", ["run"])
    assert not is_relevant("nothing here", ["run", ""])
    short = density("Tobias lives in Glasgow", ["Glasgow"])
    long = density("Tobias lives in Glasgow. " + "filler " * 200, ["Glasgow"])
    assert short == pytest.approx(7 / 23) and long < short / 20


def test_change_awareness_needs_both_keyword_sets() -> None:
    assert change_aware(["He lives in Glasgow", "moved to Reykjavik"], OLD, NEW)
    assert not change_aware(["moved to Reykjavik"], OLD, NEW)
    assert current_state_correct(["moved to Reykjavik", "lived in Glasgow"], OLD, NEW)
    assert not current_state_correct(["lived in Glasgow", "moved to Reykjavik"], OLD, NEW)
    assert not current_state_correct(["unrelated"], OLD, NEW)


def test_score_results_per_set() -> None:
    queries = [
        SubstringQuery(query_id="s1", text="exercise?", set="standard", expected=["run", "yoga"]),
        SubstringQuery(query_id="s2", text="food?", set="standard", expected=["ramen"]),
        SubstringQuery(query_id="a1", text="something", set="adversarial", expected=[]),
        SubstringQuery(
            query_id="c1",
            text="now?",
            set="current_state",
            expected=NEW,
            old_keywords=OLD,
            new_keywords=NEW,
        ),
        SubstringQuery(
            query_id="w1",
            text="change?",
            set="change_awareness",
            expected=OLD + NEW,
            old_keywords=OLD,
            new_keywords=NEW,
        ),
        SubstringQuery(query_id="n1", text="roof colour?", set="null"),
        SubstringQuery(query_id="n2", text="blood type?", set="null"),
    ]
    results = {
        "s1": ["ate pho", "did yoga", "went for a run", "x", "y", "z"],
        "s2": ["nothing"],
        "c1": ["moved to Reykjavik"],
        "w1": ["moved to Reykjavik", "used to live in Glasgow"],
        "n1": ["a spurious memory"],
        "n2": [],
    }
    report = score_results(queries, results, k=5)
    rows = {r.query_id: r for r in report.results}
    assert "a1" not in rows  # adversarial without expected substrings is N/A
    assert rows["s1"].first_hit_rank == 2 and rows["s1"].rr == 0.5
    assert rows["s1"].precision_at_5 == pytest.approx(0.4)
    assert rows["s1"].tokens == pytest.approx(sum(len(t) for t in results["s1"][:5]) / 4)
    assert rows["s1"].hit_at == {1: 0.0, 3: 1.0, 5: 1.0}
    m = report.metrics
    assert m["mrr"] == pytest.approx(0.25)  # standard set: (0.5 + 0) / 2
    assert m["current_state_accuracy"] == 1.0 and m["change_awareness"] == 1.0
    assert m["null_false_positive_rate"] == 0.5
    assert report.per_query("rr")["s2"] == 0.0


def test_driver_on_generated_corpus_with_bm25() -> None:
    corpus = generate_corpus(3, seed=1)
    ds = to_dataset(corpus)
    bm25 = Fts5Bm25Retriever()
    bm25.build_index(ds.corpus)
    report = run_substring_queries(text_search(bm25, ds.corpus), corpus.queries_for(), k=5)
    assert report.metrics["null_false_positive_rate"] == 1.0  # OR-BM25 always returns something
    assert report.metrics["old_memory_recall_at_5"] > 0.6
    assert 0 < report.metrics["relevance_density"] < 1
    assert report.per_set["standard"]["n"] == 48
    docs = [Doc(id=1, content="alpha"), Doc(id=2, content="beta")]
    assert text_search(lambda q, k: [2, 9], docs)("q", 5) == ["beta"]
