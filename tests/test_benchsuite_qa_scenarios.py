"""QA (seed 002), scenario (seed 003) and substring (seed 000) benchmarks as ordinary suites."""

from __future__ import annotations

import pytest

from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.loop.pipeline import run_suite
from evalloop.report.strata import strata_means
from evalloop.retrieval import run_qa, run_substring_queries, text_search
from evalloop.retrieval.scorers import ndcg, scenario_accuracy
from evalloop.retrieval.suite_data import load_corpus, load_substring_queries, qa_dataset
from evalloop.retrieval.suite_targets import TextMemory, retriever_factory
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import PACKAGE_FIXTURES

DATA = PACKAGE_FIXTURES / "data"


@pytest.fixture
def settings(tmp_path):
    return load_settings(tmp_path)


@pytest.mark.parametrize("mode", ["accumulate", "reset"])
def test_qa_suite_equals_the_qa_protocol(settings, mode):
    suite = find_suite("memory-qa", settings.project_dir)
    suite.target.params["mode"] = mode
    suite.target.params["retriever"] = "bm25"
    store = HistoryStore(settings.database_url)
    report = run_suite(suite, settings=settings, store=store)
    pairs = qa_dataset(DATA / "memory-qa").pairs
    direct = run_qa(TextMemory(retriever_factory("bm25")), pairs, mode=mode, k=5)
    means = {s: report.executed.summaries[s].mean for s in ("qa-exact-match", "qa-token-f1", "qa-recall")}
    assert means["qa-exact-match"] == pytest.approx(direct.exact_match)
    assert means["qa-token-f1"] == pytest.approx(direct.f1)
    assert means["qa-recall"] == pytest.approx(direct.recall_at_k)
    strata = strata_means(store, report.executed.run.id)
    for row in strata.strata:  # per category, as the QA report gives it
        assert row.means["qa-token-f1"] == pytest.approx(direct.per_category[row.tag]["f1"])
    assert report.prepared.fingerprint["target_fingerprint"]["mode"] == mode


def test_qa_reset_mode_cannot_see_other_conversations(settings):
    suite = find_suite("memory-qa", settings.project_dir)
    suite.target.params["mode"] = "reset"
    report = run_suite(suite, settings=settings)
    target = report.prepared.target.fn
    assert target.shared is None and target.run_stats()["n_queries"] == 10
    texts = target({"question": "Which city did Ana move to?", "conversation_id": "conv-cho"})
    assert texts == []  # no word of it in Cho's memories, none close by meaning: nothing relevant
    texts = target({"question": "Where did Ana move in May?", "conversation_id": "conv-cho"})
    assert texts and all(t.startswith("Cho:") for t in texts)  # "May" is Cho's; Ana's move is not seen


CHAT = '''
class Perfect:
    ANSWERS = {"milk": "Oat milk.", "passport": "4471", "brother": "Oslo",
               "job": "A ferry captain.", "standup": "At 10:15.", "dog": "I do not know."}
    def reset(self):
        self.seen = 0
    def send(self, message):
        for key, answer in self.ANSWERS.items():
            if key in message.lower() and message.endswith("?"):
                return answer
        return "ok"

class Verbose(Perfect):
    def send(self, message):
        return super().send(message) + " " + "and so on " * 10
'''


def test_scenario_suite_grades_keywords_conciseness_and_similarity(tmp_path, monkeypatch, settings):
    reference = run_suite("memory-scenarios", settings=settings)
    assert reference.executed.case_errors == 0 and reference.executed.summaries["scenario-accuracy"].n == 5
    (tmp_path / "chatbots.py").write_text(CHAT)
    monkeypatch.chdir(tmp_path)
    suite = find_suite("memory-scenarios", settings.project_dir)
    for chat, expected in (("chatbots:Perfect", 1.0), ("chatbots:Verbose", 0.5)):
        suite.target.params["chat"] = chat
        report = run_suite(suite, settings=settings)
        assert report.executed.summaries["scenario-accuracy"].mean == pytest.approx(expected), chat
    turns = {"turns": [{"text": "Where is Leo?", "expected": "Leo lives in Oslo, Norway.",
                        "keywords": ["Oslo"], "max_words": 10}]}
    assert scenario_accuracy(None, ["He lives in Oslo."], turns).value == 1.0
    no_keyword = scenario_accuracy(None, ["Leo lives in Norway's capital city."], turns)
    plain = scenario_accuracy(None, ["Leo lives in Norway's capital city."], turns, similarity=False)
    assert plain.value == 0.0 and no_keyword.value in (0.0, 0.5)
    assert scenario_accuracy(None, ["Bananas are yellow."], turns).value == 0.0


def test_substring_suite_equals_the_substring_protocol(settings):
    suite = find_suite("memory-substring", settings.project_dir)
    suite.target.params["retriever"] = "bm25"
    store = HistoryStore(settings.database_url)
    report = run_suite(suite, settings=settings, store=store)
    folder = DATA / "memory-bench-substring"
    bm25 = retriever_factory("bm25")()
    corpus = load_corpus(folder)
    bm25.build_index(corpus)
    direct = run_substring_queries(text_search(bm25, corpus), load_substring_queries(folder), k=5)
    hits = {r.query_id: r.hit_at[5] for r in direct.results if r.set != "null"}
    assert store.case_scores(report.executed.run.id, "substring-hit") == pytest.approx(hits)
    assert report.executed.summaries["null-rejection"].mean == pytest.approx(
        1 - direct.metrics["null_false_positive_rate"])
    strata = strata_means(store, report.executed.run.id)
    assert strata.mean("old_memory", "substring-hit") == pytest.approx(direct.metrics["old_memory_recall_at_5"])
    assert strata.mean("null", "substring-hit") is None  # skipped, not counted as 0


def test_graded_ndcg_scorer_uses_the_grades():
    expected = {"relevance": {"a": 2, "b": 1}}
    best = ndcg(None, ["a", "b"], expected, k=10).value
    swapped = ndcg(None, ["b", "a"], expected, k=10).value
    assert best == pytest.approx(1.0) and swapped == pytest.approx((1 + 2 / 1.5849625) / (2 + 1 / 1.5849625))
    assert ndcg(None, {"ids": ["x"]}, {"relevant_ids": ["a"]}).value == 0.0
