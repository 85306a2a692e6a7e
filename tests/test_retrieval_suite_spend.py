"""Seed 000 on the suite path: relevance density and token spend per query (issue 7)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalloop import load_settings, run_suite
from evalloop.history.store import HistoryStore
from evalloop.retrieval.retriever_eval import build_index
from evalloop.retrieval.substring import run_substring_queries, text_search
from evalloop.retrieval.suite_data import load_corpus, load_substring_queries
from evalloop.retrieval.suite_targets import RetrieverTarget, _Corpus, retriever_factory

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
DATA = Path(__file__).resolve().parents[1] / "src" / "evalloop" / "fixtures" / "data" / "memory-bench-substring"


def direct(spec: str):
    """The seed-000 driver's own figures for a retriever over the shipped dataset (k = 5)."""
    corpus = load_corpus(DATA)
    retriever = retriever_factory(spec)()
    build_index(retriever, _Corpus(corpus))
    return run_substring_queries(text_search(retriever, corpus), load_substring_queries(DATA), k=5)


def test_memory_substring_json_reports_density_and_tokens_per_query(tmp_path):
    done = subprocess.run([EVALLOOP, "run", "--suite", "memory-substring", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)["target_stats"]
    expected = direct("memory").metrics
    assert stats["tokens_per_query"] == pytest.approx(expected["tokens_per_query"], abs=1e-3)
    assert stats["relevance_density"] == pytest.approx(expected["relevance_density"], abs=1e-3)
    assert 0 < stats["relevance_density"] < 1 and stats["tokens_per_query"] > 10
    # stored with the run, so `history` and reports can show it later
    run = HistoryStore(load_settings(tmp_path).database_url).runs("memory-substring")[0]
    assert run.notes["target_stats"]["tokens_per_query"] == stats["tokens_per_query"]


def test_relevance_density_scorer_gives_per_query_values(tmp_path):
    suite = {"name": "subst-bm25", "dataset": str(DATA),
             "target": {"ref": "evalloop.retrieval.suite_targets:RetrieverTarget",
                        "params": {"retriever": "bm25", "k": 5, "returns": "texts"}},
             "scorers": ["relevance-density", "substring-hit"]}
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "subst-bm25.yaml").write_text(yaml.safe_dump(suite))
    settings = load_settings(tmp_path)
    report = run_suite("subst-bm25", settings=settings)
    truth = {r.query_id: r.density for r in direct("bm25").results
             if r.set != "null" and r.density is not None}
    per_case = HistoryStore(settings.database_url).case_scores(report.executed.run.id,
                                                               "relevance-density")
    assert per_case.keys() == truth.keys() and len(truth) > 20
    assert all(per_case[q] == pytest.approx(truth[q]) for q in truth)
    (density,) = [s for s in report.comparison.scorers if s.scorer == "relevance-density"]
    assert density.current == pytest.approx(sum(truth.values()) / len(truth))
    assert report.extras["target_stats"]["relevance_density"] is not None


def test_ids_target_reports_no_density_and_plain_texts_only_tokens():
    target = RetrieverTarget(retriever="bm25", k=3, dataset=str(DATA), returns="texts")
    texts = target({"query": "where do I live"})
    stats = target.run_stats()
    assert stats["tokens_per_query"] == pytest.approx(sum(len(t) for t in texts) / 4, abs=1e-3)
    assert "relevance_density" not in stats
    ids = RetrieverTarget(retriever="bm25", k=3, dataset=str(DATA))
    ids({"query": "where do I live"})
    assert "tokens_per_query" not in ids.run_stats()
