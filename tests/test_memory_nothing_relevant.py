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
    for scorer in ("null-rejection", "substring-hit", "substring-mrr", "change-detection"):
        assert means[FUSED][scorer] >= means[TEXT_ONLY][scorer] - 1e-9, scorer
