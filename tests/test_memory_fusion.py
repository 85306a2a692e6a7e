"""The store's fused search never loses to its own text search: not on generated conversations
(where the shipped static embedder is weak and text wins), not on the shipped fact corpus (where
vectors help). Weights chosen by bench/fusion_weights.py on other seeds than these."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalloop.memory.embedders import DEFAULT_EMBEDDER_NAME
from evalloop.memory.search import Fusion
from evalloop.retrieval.conversations import generate_conversations
from evalloop.retrieval.loaders import load_locomo
from evalloop.retrieval.retrievers import retriever_factory, run_scoped
from evalloop.retrieval.suite_data import retrieval_dataset
from evalloop.suites.models import PACKAGE_FIXTURES

METRICS = ("hit@5", "hit@10", "recall@10", "ndcg@10", "mrr")


def ablation(dataset) -> dict[str, dict[str, float]]:  # noqa: ANN001
    runs = {"text": {"vector_weight": 0.0}, "vectors": {"text_weight": 0.0}, "fused": {}}
    return {name: run_scoped(retriever_factory("memory", options=opts), dataset, k=20, ks=(5, 10)).overall
            for name, opts in runs.items()}


@pytest.fixture(scope="module")
def conversations(tmp_path_factory) -> object:
    path = Path(tmp_path_factory.mktemp("conv")) / "conversations.json"
    path.write_text(json.dumps(generate_conversations(6, seed=7)), encoding="utf-8")  # not a calibration seed
    return load_locomo(path)[0]


def test_the_default_fusion_is_the_calibrated_one():
    fusion = Fusion()
    assert (fusion.text_weight, fusion.vector_weight, fusion.rrf_k, fusion.text_confident_at) == (1.0, 0.15, 20, 0.15)
    assert fusion.similarity_floor is None and fusion.for_embedder(DEFAULT_EMBEDDER_NAME).similarity_floor == 0.55


def test_fused_is_never_below_text_alone_on_conversations(conversations):
    got = ablation(conversations)
    for m in METRICS:
        assert got["fused"][m] >= got["text"][m] - 1e-9, m
    assert got["fused"]["ndcg@10"] > got["vectors"]["ndcg@10"]


def test_fused_is_never_below_text_alone_on_the_shipped_corpus():
    got = ablation(retrieval_dataset(PACKAGE_FIXTURES / "data" / "memory-bench"))
    for m in METRICS:
        assert got["fused"][m] >= got["text"][m] - 1e-9, m


def test_a_query_its_text_match_barely_covers_gives_the_vectors_equal_weight():
    from evalloop.memory import MemoryStore
    from evalloop.memory.embedders import HashingEmbedder

    with MemoryStore(":memory:", HashingEmbedder(64)) as store:
        store.store_many(["the cat sat on the mat", "dogs bark at night", "a mat for yoga"])
        hits, coverage = store._text.search_covered("mat", 5)
        assert coverage == pytest.approx(1.0) and len(hits) == 2
        _, weak = store._text.search_covered("zebra quagga okapi mat", 5)  # three words no memory has
        assert 0 < weak < 0.15
    assert Fusion().weights(weak) == (1.0, 1.0) and Fusion().weights(coverage) == (1.0, 0.15)
    assert Fusion().weights(None) == (1.0, 0.15)  # FTS5 ranked the query itself: no coverage known
