"""Reference retrievers on real SQLite FTS5: safe MATCH strings, BM25, OpenClaw-style hybrid."""

from __future__ import annotations

import hashlib
import re
import sqlite3

import numpy as np
import pytest

from evalloop.retrieval import Doc, compare, generate_corpus, to_dataset
from evalloop.retrieval.fts import match_query
from evalloop.retrieval.hybrid import chunk_markdown, text_score
from evalloop.retrieval.reference_retrievers import (
    Fts5Bm25Retriever,
    OpenClawHybridRetriever,
    reference_retrievers,
)


class WordHashEmbedder:
    """Deterministic bag-of-words embedder for tests: words hashed into 128 signed buckets."""

    name = "test-wordhash"
    dim = 128

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


NASTY = [
    'he said "hi" AND NEAR(x y) OR -z*',
    "col:value ^start (paren) {brace}",
    'unterminated "quote',
    "naïve café — 東京 tokens",
    "AND OR NOT",
]


@pytest.mark.parametrize("text", NASTY)
def test_match_strings_are_safe_on_real_fts5(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.execute("INSERT INTO t VALUES (?)", (text,))
    for op in ("OR", "AND"):
        match = match_query(text, op)
        assert match is not None
        rows = conn.execute("SELECT body FROM t WHERE t MATCH ?", (match,)).fetchall()
        assert rows == [(text,)]  # the document matches its own text, literally
    assert match_query("?!  --", "OR") is None


def test_bm25_ranks_by_relevance_then_importance() -> None:
    docs = [
        Doc(id=1, content="kafka consumer lag alert", importance=0.1),
        Doc(id=2, content="notes about lunch", tags="kafka", importance=0.5),
        Doc(id=3, content="kafka kafka kafka consumer lag alert runbook", importance=0.2),
        Doc(id=4, content="unrelated gardening"),
    ]
    r = Fts5Bm25Retriever()
    r.build_index(docs)
    ranked = r.retrieve("kafka consumer lag?", 10)
    assert ranked[:2] in (["3", "1"], ["1", "3"]) and "4" not in ranked
    assert "2" in ranked  # matched through the tags column
    assert r.retrieve("!!!", 5) == []
    assert r.index_size_bytes() > 0
    twins = Fts5Bm25Retriever()
    twins.build_index(
        [
            Doc(id="a", content="same text", importance=0.1),
            Doc(id="b", content="same text", importance=0.9),
        ]
    )
    assert twins.retrieve("same", 2) == ["b", "a"]


def test_chunking_respects_size_overlap_and_lines() -> None:
    lines = [f"- line {i} " + "x" * (i * 7 % 90) for i in range(200)]
    text = "\n".join(lines)
    chunks = chunk_markdown(text, max_chars=400, overlap=80)
    assert len(chunks) > 5
    assert all(len(c.text) <= 400 for c in chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 200
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start_line <= a.end_line + 1  # no line is skipped
        carried = (
            a.text.split("\n")[b.start_line - a.start_line :] if b.start_line <= a.end_line else []
        )
        assert sum(len(s) + 1 for s in carried) <= 80
    long = chunk_markdown("y" * 1000, max_chars=300, overlap=0)
    assert [len(c.text) for c in long] == [300, 300, 300, 100]
    assert chunk_markdown("short\nnote")[0].text == "short\nnote"


def test_text_score_formula() -> None:
    assert text_score(-3.2) == 1.0  # FTS5 ranks are negative: every match scores 1
    assert text_score(1.0) == 0.5
    assert text_score(float("nan")) == pytest.approx(1 / 1000)


def test_hybrid_merges_thresholds_and_limits() -> None:
    emb = WordHashEmbedder()
    docs = [Doc(id=i, content=f"note {i} about topic{i % 5} and misc{i}") for i in range(40)]
    docs.append(Doc(id="target", content="the blue heron nests near the reservoir"))
    h = OpenClawHybridRetriever(emb)
    h.build_index(docs)
    hits = h.search("blue heron reservoir")
    assert hits[0].doc_id == "target"
    assert hits[0].text_score == 1.0  # all tokens present: AND query matched
    assert hits[0].score == pytest.approx(0.7 * hits[0].vector_score + 0.3)
    assert all(x.score >= 0.35 for x in hits) and len(hits) <= 6
    assert h.retrieve("blue heron reservoir", 20)[0] == "target"
    assert len(h.retrieve("note topic1 misc", 20)) <= 6  # default limit 6
    loose = OpenClawHybridRetriever(emb, min_score=0.0)
    loose.build_index(docs)
    partial = loose.search("heron zebra")  # AND query misses: vector score alone
    assert partial[0].doc_id == "target" and partial[0].text_score == 0.0
    assert partial[0].score == pytest.approx(0.7 * partial[0].vector_score)
    assert h.search("heron zebra") == []  # under the 0.35 threshold
    strict = OpenClawHybridRetriever(emb, min_score=0.99)
    strict.build_index(docs)
    assert strict.retrieve("completely different words", 5) == []
    unlimited = OpenClawHybridRetriever(emb, limit=None, min_score=0.0)
    unlimited.build_index(docs)
    assert len(unlimited.retrieve("note topic1", 20)) == 20
    assert h.index_size_bytes() > 41 * emb.dim * 4


def test_reference_retrievers_on_generated_corpus() -> None:
    corpus = generate_corpus(weeks=2, mode="fast", seed=7)
    ds = to_dataset(corpus)
    assert set(reference_retrievers()) == {"fts5-bm25"}
    table = compare(reference_retrievers(WordHashEmbedder()), ds, k=20)
    bm25 = table.results["fts5-bm25"]
    hybrid = table.results["openclaw-hybrid"]
    assert bm25.n_queries == hybrid.n_queries == len(ds.queries) > 40
    # old-memory queries name the entities: lexical search finds most of them
    assert bm25.per_stratum["old_memory"]["hit@5"] > 0.6
    assert 0.0 < hybrid.overall["mrr"] <= 1.0
    assert all(len(ids) <= 6 for ids in hybrid.run.values())
    journal = to_dataset(corpus, delivery="journal")
    jt = compare(reference_retrievers(WordHashEmbedder()), journal, k=20)
    assert jt.results["fts5-bm25"].overall["hit@5"] > 0.5
