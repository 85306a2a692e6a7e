"""The hybrid reference calibrated to the shipped embedder, kept beside its seed-faithful form, and
the embedded store's weighted fusion with each side switchable (the ablation) — on the shipped
memory-bench data, with the real static embedder and real SQLite FTS5."""

from __future__ import annotations

import json

import pytest

from evalloop.memory import MemoryStore
from evalloop.memory.embedders import HashingEmbedder
from evalloop.memory.search import Fusion
from evalloop.retrieval.dataset import load_dataset
from evalloop.retrieval.retriever_eval import run_retriever
from evalloop.retrieval.retrievers import parse_spec, retriever_factory
from evalloop.suites.models import PACKAGE_FIXTURES
from support.cli import cli

BENCH = PACKAGE_FIXTURES / "data" / "memory-bench"


@pytest.fixture(scope="module")
def dataset():
    return load_dataset(BENCH)


def test_seed_faithful_hybrid_returns_nothing_for_a_third_of_the_queries(dataset):
    seed = retriever_factory("hybrid-seed000")()
    seed.build_index(dataset.corpus)
    empty = [q for q in dataset.queries if not seed.retrieve(q.text, 20)]
    assert len(empty) >= 25  # the 0.35 floor needs cosine >= 0.5 from a 256-dim static embedder
    hits = [h for q in dataset.queries for h in seed.search(q.text, 6)]
    assert {h.text_score for h in hits if h.text_score} <= {1.0}  # every keyword match scores 1.0


def test_calibrated_hybrid_answers_every_query_with_graded_text_scores(dataset):
    hybrid = retriever_factory("hybrid")()
    hybrid.build_index(dataset.corpus)
    assert all(len(hybrid.retrieve(q.text, 10)) == 10 for q in dataset.queries)
    scores = sorted({round(h.text_score, 6) for h in hybrid.search("Where does my sister live and work?", 20)
                     if h.text_score})
    assert len(scores) > 2 and scores[-1] == 1.0 and 0 < scores[0] < 1


def test_default_hybrid_beats_bm25_and_the_store_beats_both(dataset):
    results = {name: run_retriever(retriever_factory(name)(), dataset, k=20).overall
               for name in ("bm25", "hybrid-seed000", "hybrid", "memory")}
    for metric in ("recall@5", "recall@10", "ndcg@10", "mrr"):
        assert results["memory"][metric] > results["hybrid"][metric] > results["bm25"][metric]
    for metric in ("recall@5", "recall@10", "ndcg@10"):  # seed 000's floor costs recall
        assert results["bm25"][metric] > results["hybrid-seed000"][metric]


def test_fusion_weights_switch_a_side_off():
    with MemoryStore(":memory:", HashingEmbedder(64), text_weight=0.0) as dense, \
            MemoryStore(":memory:", HashingEmbedder(64), vector_weight=0.0) as text:
        for store in (dense, text):
            store.store_many(["the cat sat on the mat", "dogs bark at night", "a mat for yoga"])
        assert all(h.text_rank is None for h in dense.find("mat", 3))
        found = text.find("mat", 3)
        assert {h.information for h in found} == {"the cat sat on the mat", "a mat for yoga"}  # no vector-only
    with pytest.raises(ValueError, match="cannot both be 0"):
        Fusion(text_weight=0, vector_weight=0)


def test_ablation_targets_parse_and_bad_options_end_in_one_line(tmp_path):
    assert parse_spec("memory[vector_weight=0, text_weight=1.5]") == (
        "memory", {"vector_weight": 0, "text_weight": 1.5})
    assert parse_spec("hybrid[fusion=weighted]") == ("hybrid", {"fusion": "weighted"})
    assert parse_spec("bm25") == ("bm25", {})
    cmp = cli(tmp_path, "compare-targets", "-s", "retrieval-bm25", "-t", "memory", "-t",
              "memory[vector_weight=0]", "--limit", "12", "--json")
    assert cmp.returncode == 0, cmp.stderr
    rows = {r["target"]: r for r in json.loads(cmp.stdout)["results"]}
    assert set(rows) == {"memory", "memory[vector_weight=0]"}
    assert rows["memory[vector_weight=0]"]["vs_reference"]["mrr@20"]["n"] == 12
    assert rows["memory"]["suite"] != rows["memory[vector_weight=0]"]["suite"]
    bad = cli(tmp_path, "compare-targets", "-s", "retrieval-bm25", "-t", "memory[colour=1]")
    assert bad.returncode == 2 and "option 'colour'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_floor_relative_to_the_best_hit_keeps_only_close_scores(dataset):
    loose = retriever_factory("hybrid", options={"fusion": "weighted"})()
    tight = retriever_factory("hybrid", options={"fusion": "weighted", "relative_floor": 0.9})()
    for r in (loose, tight):
        r.build_index(dataset.corpus)
    query = "Where does my sister live and work?"
    hits = tight.search(query, 20)
    assert 0 < len(hits) < len(loose.search(query, 20)) == 20
    assert all(h.score >= 0.9 * hits[0].score for h in hits)
