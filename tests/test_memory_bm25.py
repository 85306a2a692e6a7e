"""The full-text side of ``find`` scores BM25 in NumPy over FTS5's postings: it must rank exactly
as FTS5's own ``bm25()`` / ``ORDER BY rank`` does, on real SQLite, through writes and deletes
by this connection and others."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from evalloop.memory import HashingEmbedder, MemoryStore
from evalloop.memory.bm25 import read_varint, read_varints
from evalloop.memory.textsearch import TextSearcher

WORDS = ["cache", "judge", "merge", "scorer", "token", "budget", "queue", "index", "window", "prompt"]
QUERIES = [
    "cache",
    "judge merge",
    "caching caches cached",  # one stem, three query phrases
    "scorer token budget queue",
    "window of the prompt",
    "index",
    "solo cache",
    "solo",
]


def _corpus(n: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.choice([2, 3, 5, 8, 20, 60, 200])  # 200 words: a two-byte %_docsize entry
        solo = " solo" if i % 3 == 0 else ""  # never twice in a row: its rows come from a plain MATCH
        out.append(" ".join(rng.choice(WORDS) for _ in range(length)) + f"{solo} n{i}")
    return out


def _fts5(conn, searcher: TextSearcher, query: str, limit: int, allowed=None) -> list[tuple[int, float]]:
    expr = searcher.expression(query)
    sql = "SELECT rowid, -bm25(memory_fts) FROM memory_fts WHERE memory_fts MATCH ?"
    params: list = [expr]
    if allowed is not None:
        sql += f" AND rowid IN ({','.join('?' * len(allowed))})"
        params += list(allowed)
    return conn.execute(sql + " ORDER BY rank LIMIT ?", [*params, limit]).fetchall()


def _check_against_fts5(store: MemoryStore, allowed=None) -> None:
    text = store._text
    for query in QUERIES:
        expected = _fts5(store._conn, text, query, 25, allowed)
        assert expected, query
        assert text.search(query, 25, allowed) == [pk for pk, _ in expected], query
        rowids, scores = text.bm25.scores(text._phrases(text._kept(query)))
        mine = dict(zip(rowids.tolist(), scores.tolist(), strict=True))
        for pk, score in expected:
            assert mine[pk] == pytest.approx(score, rel=1e-12), (query, pk)


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "bm25.db", embedder=HashingEmbedder(16))
    yield s
    s.close()


def test_numpy_bm25_ranks_and_scores_as_fts5(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalloop.memory import textsearch

    monkeypatch.setattr(textsearch, "POSTINGS_BUDGET", 10**6)  # keep every query word
    store.store_many(_corpus(400))
    phrases = store._text._phrases(store._text._kept("solo cache"))
    assert [(p.term, p.repeats) for p in phrases] == [("solo", False), ("cach", True)]  # both postings reads
    _check_against_fts5(store)
    _check_against_fts5(store, allowed=list(range(3, 400, 7)))


def test_lengths_follow_this_connections_deletes_and_updates(store: MemoryStore) -> None:
    ids = store.store_many(_corpus(120))
    store.find("cache", 5)  # lengths cached
    for mid in ids[-5:]:  # the newest rows: their pks come back for the next memories
        store.delete(mid)
    store.update(ids[3], "cache " * 150 + "rewritten")
    store.store_many(["cache judge", "cache " * 90 + "long again", "merge"])
    _check_against_fts5(store)


def test_deleting_old_rows_rereads_only_the_averages(store: MemoryStore) -> None:
    """A deleted pk below the newest is never reused, so the next find keeps the cached lengths
    (it used to re-read every length from the deleted row on) and still ranks as FTS5 does."""
    ids = store.store_many(_corpus(120))
    store.find("cache", 5)  # lengths cached
    index = store._text.bm25
    cached = len(index._lengths)
    for mid in ids[10:15]:
        store.delete(mid)
    assert index._stale_from == cached  # nothing below the cached lengths to read again
    _check_against_fts5(store)
    store.update(ids[40], "cache " * 120 + "rewritten")  # an old row replaced: a new pk on top
    assert index._stale_from == cached
    _check_against_fts5(store)


def test_lengths_follow_another_connections_writes(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    emb = HashingEmbedder(16)
    with MemoryStore(path, emb) as reader, MemoryStore(path, emb) as writer:
        ids = reader.store_many(_corpus(60))
        reader.find("cache", 5)
        writer.delete(ids[-1])
        writer.store_many(["cache " * 300 + "from the writer", "judge merge short"])
        _check_against_fts5(reader)
        assert reader.find("writer", 1)[0].information.endswith("from the writer")


def test_a_word_fts5_splits_into_a_phrase_is_ranked_by_fts5_with_the_filter(store: MemoryStore) -> None:
    a = store.store("snake_case names in the config loader", ["keep"])
    b = store.store("snake case names elsewhere", ["keep"])
    store.store("snake_case again but filtered out", ["drop"])
    pks = {pk for pk, in store._conn.execute("SELECT pk FROM memories")}
    kept = [pk for (pk,) in store._conn.execute("SELECT memory_pk FROM memory_tags WHERE tag = 'keep'")]
    assert [len(t) for _, t in store._text._kept("snake_case")] == [2]  # a phrase: not one term
    hits = store._text.search("snake_case", 10, kept)
    assert len(hits) == 2 and set(hits) <= pks  # "snake case" as a phrase, in both kept rows
    assert {h.record.id for h in store.find("snake_case", 5, tags="keep")} == {a, b}


def test_read_varint_decodes_sqlite_varints() -> None:
    assert read_varint(b"\x10") == (16, 1)
    assert read_varint(b"\x81\x00") == (128, 2)
    assert read_varint(b"\x86\x8d\x20\xd8\xff\x17", 3) == (1_458_071, 6)
    assert read_varint(b"\xff" * 8 + b"\x01") == ((2**56 - 1) << 8 | 1, 9)


def test_read_varints_decodes_a_run_of_varints_at_once() -> None:
    values = [0, 5, 127, 128, 300, 16_383, 16_384, 2_000_000, 3]
    data = b""
    for v in values:  # SQLite's encoding: 7 bits a byte, high bit set on all but the last
        groups = [v & 0x7F]
        while v > 0x7F:
            v >>= 7
            groups.append(0x80 | (v & 0x7F))
        data += bytes(reversed(groups))
    assert read_varints(data).tolist() == values
    assert [read_varint(data, 0)[0]] == values[:1]
    assert read_varints(b"").tolist() == []


def test_a_damaged_docsize_table_fails_as_fts5_fails(store: MemoryStore) -> None:
    store.store_many(_corpus(50))
    store.find("cache", 3)
    assert store._text._numpy_bm25
    store._conn.execute("UPDATE memory_fts_docsize SET sz = x'0102' WHERE id = 1")  # two sizes, one column
    store._text.invalidate(1)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):  # FTS5's own words, as before
        store._text.search("judge merge", 25)
    assert not store._text._numpy_bm25  # handed to FTS5, which reads the layout itself
