"""QA scoring (exact match, token F1, recall@k) and both ingestion modes on real SQLite."""

from __future__ import annotations

import sqlite3

import pytest

from evalloop.retrieval.fts import match_query
from evalloop.retrieval.qa import QAPair, arun_qa, exact_match, run_qa, score_pair, token_f1


class SqliteMemory:
    """A tiny memory store on real SQLite FTS5."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.resets = 0
        self.reset()

    def reset(self) -> None:
        self.resets += 1
        self.conn.execute("DROP TABLE IF EXISTS mem")
        self.conn.execute("CREATE VIRTUAL TABLE mem USING fts5(text, conv UNINDEXED)")

    def add(self, text: str, metadata: dict | None = None) -> None:
        self.conn.execute(
            "INSERT INTO mem VALUES (?, ?)", (text, (metadata or {}).get("conversation_id"))
        )

    def search(self, query: str, k: int) -> list[dict]:
        match = match_query(query, "OR")
        if match is None:
            return []
        rows = self.conn.execute(
            "SELECT text FROM mem WHERE mem MATCH ? ORDER BY bm25(mem) LIMIT ?", (match, k)
        ).fetchall()
        return [{"text": r[0]} for r in rows]


class AsyncSqliteMemory(SqliteMemory):
    async def add(self, text: str, metadata: dict | None = None) -> None:  # type: ignore[override]
        SqliteMemory.add(self, text, metadata)

    async def search(self, query: str, k: int) -> list[dict]:  # type: ignore[override]
        return SqliteMemory.search(self, query, k)


PAIRS = [
    QAPair(
        id="A1",
        conversation_id="A",
        category="single-hop",
        question="Which language does Ines prefer?",
        ground_truth="Elixir",
        conversation=["Ines prefers Elixir for backend work", "Ines used to write Java"],
    ),
    QAPair(
        id="A2",
        conversation_id="A",
        category="temporal",
        question="What did Ines write before?",
        ground_truth="Java",
        conversation=["Ines prefers Elixir for backend work", "Ines used to write Java"],
    ),
    QAPair(
        id="B1",
        conversation_id="B",
        category="multi-hop",
        question="Which cluster tool does Ines's team lead use?",
        ground_truth="Nomad",
        conversation=["Ines's team lead is Okafor", "Okafor runs every cluster tool on Nomad"],
    ),
    # answerable only from conversation B: reset mode cannot see it
    QAPair(
        id="C1",
        conversation_id="C",
        category="multi-hop",
        question="Who is the team lead?",
        ground_truth="Okafor",
        conversation=["The office plant needs water"],
    ),
]


def test_token_f1_and_exact_match() -> None:
    assert token_f1("the Elixir language", "elixir") == pytest.approx(0.5)
    assert token_f1("a a b", "a b b") == pytest.approx(2 / 3)  # multiset overlap
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0
    assert token_f1("Nomad!", "nomad") == 1.0
    assert exact_match("Runs on NOMAD clusters", "Nomad")
    res = score_pair(PAIRS[0], ["Ines used to write Java", "Elixir"], k=5)
    assert res.retrieved == "Elixir" and res.f1 == 1.0 and res.exact_match and res.recalled
    none = score_pair(PAIRS[0], [], k=5)
    assert not none.exact_match and none.f1 == 0.0 and not none.recalled


def test_reset_mode_isolates_pairs() -> None:
    mem = SqliteMemory()
    report = run_qa(mem, PAIRS, mode="reset", k=3)
    assert mem.resets == 1 + len(PAIRS)
    assert {r.id: r.recalled for r in report.results} == {
        "A1": True,
        "A2": True,
        "B1": True,
        "C1": False,
    }
    assert report.recall_at_k == 0.75
    assert report.per_category["multi-hop"]["recall_at_k"] == 0.5
    assert report.per_category["single-hop"]["exact_match"] == 1.0


async def test_accumulate_mode_sees_all_history_async_target() -> None:
    mem = AsyncSqliteMemory()
    report = await arun_qa(mem, PAIRS, mode="accumulate", k=3)
    assert mem.conn.execute("SELECT count(*) FROM mem").fetchone()[0] == 5  # A written once
    assert report.recall_at_k == 1.0 and report.n == 4
    assert {r.id for r in report.results if r.exact_match} == {"A1", "A2", "B1", "C1"}
    assert 0 < report.f1 < 1
    with pytest.raises(ValueError, match="ingestion mode"):
        await arun_qa(mem, PAIRS, mode="sometimes")  # type: ignore[arg-type]
