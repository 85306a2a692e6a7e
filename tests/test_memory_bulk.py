"""Bulk writes on real SQLite: batches written table by table stay consistent (text index,
tag counts, vectors), on both vector paths and on files written with the old per-row triggers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from evalloop.memory import HashingEmbedder, MemoryStore
from evalloop.memory import schema as schema_module

OLD_TRIGGERS = """
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts(rowid, information) VALUES (new.pk, new.information);
END;
CREATE TRIGGER memory_tags_count_insert AFTER INSERT ON memory_tags BEGIN
    INSERT INTO memory_tag_counts(tag, n) VALUES (new.tag, 1)
    ON CONFLICT(tag) DO UPDATE SET n = n + 1;
END;
"""


@pytest.fixture(params=["sqlite-vec", "numpy"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "on" if request.param == "sqlite-vec" else "off")
    return request.param


def _consistent(store: MemoryStore) -> None:
    conn = store._conn
    (n,) = conn.execute("SELECT count(*) FROM memories").fetchone()
    (vectors,) = conn.execute("SELECT count(*) FROM memory_vectors").fetchone()
    assert vectors == n
    for (pk, info) in conn.execute("SELECT pk, information FROM memories"):
        hits = conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (f'"{info.split()[0]}"',))
        assert pk in {r[0] for r in hits}
    (fts_rows,) = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()
    assert fts_rows == n  # one text-index row per memory, none twice
    counted = dict(conn.execute("SELECT tag, n FROM memory_tag_counts WHERE n > 0"))
    actual = dict(conn.execute("SELECT tag, count(*) FROM memory_tags GROUP BY tag"))
    assert counted == actual


def test_many_batches_update_and_delete_keep_every_table_consistent(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema_module, "FIRST_BATCH", 4)
    store = MemoryStore(tmp_path / "m.db", embedder=HashingEmbedder(32))
    items = [{"information": f"w{i} memory number {i}", "tags": ["all", f"t{i % 3}"]} for i in range(50)]
    ids = store.store_many(items + items[:5], batch_size=16)  # batches 4, 8, 16, 16, 6; repeats
    assert ids[50:] == ids[:5] and len(set(ids)) == 50
    assert [r.information for r in store.list(limit=2)] == ["w49 memory number 49", "w48 memory number 48"]
    store.update(ids[0], "w0 rewritten", ["t9"])
    assert store.delete(ids[1])
    _consistent(store)
    assert store.list(limit=1)[0].id == ids[0]  # an update becomes the newest
    found = store.find("memory number 7", limit=3)
    assert found[0].information == "w7 memory number 7"
    store.close()
    reopened = MemoryStore(tmp_path / "m.db", embedder=HashingEmbedder(32))
    assert reopened.find("w42", limit=1)[0].information == "w42 memory number 42"
    reopened.close()


def test_a_file_with_the_old_insert_triggers_is_not_indexed_twice(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "old.db"
    MemoryStore(path, embedder=HashingEmbedder(32)).close()
    raw = sqlite3.connect(path)
    raw.executescript(OLD_TRIGGERS)
    raw.close()
    store = MemoryStore(path, embedder=HashingEmbedder(32))
    store.store_many([{"information": f"w{i} old file memory", "tags": ["x"]} for i in range(20)])
    _consistent(store)
    (n,) = store._conn.execute("SELECT n FROM memory_tag_counts WHERE tag = 'x'").fetchone()
    assert n == 20
    store.close()


def test_cached_document_frequencies_follow_this_and_other_connections_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalloop.memory import textsearch

    monkeypatch.setattr(textsearch, "POSTINGS_BUDGET", 10)
    path = tmp_path / "df.db"
    store = MemoryStore(path, embedder=HashingEmbedder(32))
    store.store_many([f"alpha note {i}" for i in range(8)] + ["beta note"])
    assert store._text.expression("alpha beta") == '"beta" OR "alpha"'  # df 1 + 8 within 10
    store.store_many([f"beta entry {i}" for i in range(9)])  # this connection: beta now 10
    assert store._text.expression("alpha beta") == '"alpha"'  # 8 first; 8 + 10 is over budget
    other = MemoryStore(path, embedder=HashingEmbedder(32))
    other.store_many([f"alpha extra {i}" for i in range(5)])  # another connection: alpha 13
    assert store._text.expression("alpha beta") == '"beta"'
    other.close()
    store.close()
