"""The store's fused search can say "nothing relevant": on the shipped ``memory-substring`` suite
its null queries (the answer is not in memory) are rejected at least as often as by its own text
search, through the path ``bench/retrieval_suites.py`` and ``compare-targets`` take."""

from __future__ import annotations

from pathlib import Path

from evalloop.config import load_settings
from evalloop.retrieval.suite_compare import compare_targets

TEXT_ONLY, FUSED = "memory[vector_weight=0]", "memory"


def test_fused_rejects_null_queries_as_often_as_text_alone(tmp_path: Path) -> None:
    got = compare_targets("memory-substring", [TEXT_ONLY, FUSED], settings=load_settings(tmp_path))
    means = {r.target: r.means for r in got.results}
    assert means[TEXT_ONLY]["null-rejection"] == 0.5  # the 5 of 10 null queries no memory shares a word with
    # relevance-density is a mean over the cases with a relevant result, which differ by target
    for scorer in ("null-rejection", "substring-hit", "substring-mrr", "change-detection"):
        assert means[FUSED][scorer] >= means[TEXT_ONLY][scorer] - 1e-9, scorer


def test_with_no_word_in_memory_only_close_neighbours_count() -> None:
    from evalloop.memory import MemoryStore, default_embedder
    from evalloop.memory.embedders import HashingEmbedder
    from evalloop.memory.search import SIMILARITY_FLOORS

    facts = ["Went for a 35-minute run on January 20", "Did a yoga session with Noor before work",
             "Paid $120 for the electricity bill", "Had ramen for dinner on Friday"]
    with MemoryStore(":memory:", default_embedder()) as store:
        assert store.fusion.similarity_floor == SIMILARITY_FLOORS[store.embedder_name] == 0.55
        store.store_many(facts)
        assert store.find("What is my locker combination?") == []  # no word in memory, nothing close
        close = store.find("What exercise did I do?")  # no word in memory, but one fact by meaning
        assert [h.information for h in close] == [facts[1]] and close[0].text_rank is None
        assert len(store.find("my electricity bill")) == 4  # words matched: the vectors fill up to k
    with MemoryStore(":memory:", default_embedder(), similarity_floor=-1) as store:
        store.store_many(facts)
        assert len(store.find("What is my locker combination?")) == 4  # the ablation: no floor
    with MemoryStore(":memory:", HashingEmbedder(64)) as store:  # another model's cosines: no floor
        assert store.fusion.similarity_floor == -1
    with MemoryStore(":memory:", default_embedder(), text_weight=0) as store:  # vectors alone: no floor
        store.store_many(facts)
        assert len(store.find("What is my locker combination?")) == 4
