"""Recall of a planted failure memory among 10,000 unrelated memories, by paraphrased queries,
with the shipped static embedder, on both vector paths."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evalloop.memory import MemoryStore, default_embedder

PLANTED = """Eval "memory-similarity-eval" regression detected:
- Current score: 0.68
- Baseline (rolling avg): 0.85
- Drop: 20.0%

Scorer context:
similarityDetection: 12/20 correct matches (60%)
False positives: 5 (treated different topics as similar)
False negatives: 3 (missed paraphrases)

Action: Review LLM prompt for similarity detection.
Common pattern in failures: keyword overlap without semantic match."""

BY_MEANING = "mistakes deciding whether two memories are alike"  # shares no stemmed word
PARAPHRASES = [
    "accuracy drop in detecting similar memories",
    "similar-memory matching performed worse than usual",
    "semantic duplicate detection of memories got worse",
]

TOPICS = [
    "checkout page",
    "payment gateway",
    "login form",
    "image upload",
    "search bar",
    "CSV export",
    "push notification",
    "billing invoice",
    "onboarding email",
    "dark mode",
    "calendar sync",
    "shipping label",
    "inventory count",
    "video player",
    "chat widget",
    "password reset",
    "PDF report",
    "map tiles",
    "audio transcription",
    "cron job",
    "Kubernetes pod",
    "Redis cache",
    "Postgres index",
    "GraphQL resolver",
    "webhook retry",
    "feature flag",
    "A/B test",
    "mobile build",
    "translation file",
    "font loading",
    "cookie banner",
    "rate limiter",
]
PROBLEMS = [
    "is slow on Android",
    "crashes when the network drops",
    "shows the wrong currency",
    "leaks memory after an hour",
    "times out under load",
    "renders blank in Safari",
    "double-charges some customers",
    "loses its state after refresh",
    "breaks with emoji input",
    "logs secrets in plain text",
    "returns stale data",
    "fails for users in Australia",
    "uses too much CPU",
    "ignores the timezone",
    "sends duplicate emails",
    "drops the last row",
]
FIXES = [
    "fixed by adding a retry with backoff",
    "workaround: clear the cache first",
    "root cause was an off-by-one error",
    "pinned the dependency to the previous version",
    "needs a database migration",
    "resolved after upgrading the SDK",
    "still open, see ticket",
    "caused by a race between two workers",
    "added a regression test",
    "rolled back the deploy",
]
OTHER_EVALS = [
    "Eval merge-quality scored 0.91 against baseline 0.90, no regression.",
    "Eval summary-compaction improved by 4% after the prompt change.",
    "Eval exact-match is stable at 1.0 over the last five runs.",
    "Eval retrieval-recall dropped 3%, below the 10% threshold, not flagged.",
    "Eval judge-quality errored twice because the judge model timed out.",
]


def unrelated(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        if rng.random() < 0.05:
            text = f"{rng.choice(OTHER_EVALS)} Run {len(out)}."
        else:
            text = f"The {rng.choice(TOPICS)} {rng.choice(PROBLEMS)}; {rng.choice(FIXES)} (case {len(out)})."
        out.append(text)
    return out


@pytest.fixture(scope="module")
def distractors() -> list[str]:
    return unrelated(10_000)


@pytest.mark.parametrize("backend", ["sqlite-vec", "numpy"])
def test_planted_failure_memory_is_found_by_paraphrase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, distractors: list[str], backend: str
) -> None:
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "on" if backend == "sqlite-vec" else "off")
    with MemoryStore(tmp_path / "recall.db", default_embedder()) as store:
        assert store.vector_backend == backend
        store.store_many(distractors[:6000])
        planted = store.store(PLANTED, "eval-failure,memory-similarity-eval,regression")
        store.store_many(distractors[6000:])
        assert store.count() == 10_001
        for query in PARAPHRASES:
            top = [hit.record.id for hit in store.find(query, limit=3)]
            assert planted in top, query
        by_meaning = store.find(BY_MEANING, limit=10)
        hit = next(h for h in by_meaning if h.record.id == planted)
        assert hit.vector_rank == 1 and hit.text_rank is None  # the embedder alone found it
        tagged = store.find(PARAPHRASES[0], limit=3, tags=["eval-failure"])
        assert [hit.record.id for hit in tagged] == [planted]
