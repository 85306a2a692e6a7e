"""Opening SQLite with sqlite-vec when any driver can, and the forced NumPy fallback."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from evalloop.memory import connect_sqlite, sqlite_ext
from evalloop.memory.textsearch import TextSearcher, match_expression


def test_connect_loads_sqlite_vec_through_a_capable_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "on")
    conn, vec = connect_sqlite(tmp_path / "a.db")
    assert vec is True
    (version,) = conn.execute("SELECT vec_version()").fetchone()
    assert version.startswith("v")
    blob = np.array([1.0, -2.0, 0.5, -0.1, 3, -3, 1, 1], dtype=np.float32).tobytes()
    (bits,) = conn.execute("SELECT vec_quantize_binary(?)", (blob,)).fetchone()
    assert bits == bytes([0b11010101])  # sign bits, least significant first
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    if not hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        assert type(conn).__module__.startswith(("sqlean", "pysqlite3"))
    conn.close()


def test_forced_fallback_uses_plain_sqlite_with_fts5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "off")
    conn, vec = connect_sqlite(tmp_path / "b.db")
    assert vec is False
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("SELECT vec_version()")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    conn.close()


def test_exact_numpy_search_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The faster vector path (bench/memory_bench.py) is the default, and it is exact."""
    from evalloop.memory import MemoryStore
    from evalloop.memory.embedders import HashingEmbedder

    monkeypatch.delenv("EVALLOOP_SQLITE_VEC", raising=False)
    with MemoryStore(tmp_path / "d.db", embedder=HashingEmbedder(64)) as store:
        assert store.vector_backend == "numpy"


def test_no_capable_driver_falls_back_with_one_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EVALLOOP_SQLITE_VEC", "on")
    monkeypatch.setattr(sqlite_ext, "_DRIVERS", ("no_such_driver_module",))
    monkeypatch.setattr(sqlite_ext, "_noticed", False)
    sqlite_ext.vec_driver.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="evalloop.memory"):
            first, vec1 = connect_sqlite(tmp_path / "c.db")
            second, vec2 = connect_sqlite(tmp_path / "c.db")
        assert (vec1, vec2) == (False, False)
        notices = [r.getMessage() for r in caplog.records]
        assert len(notices) == 1 and "NumPy" in notices[0] and "\n" not in notices[0]
        first.close()
        second.close()
    finally:
        sqlite_ext.vec_driver.cache_clear()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("memory similarity eval failure", '"memory" OR "similarity" OR "eval" OR "failure"'),
        ('AND "OR" NEAR(x)', '"near" OR "x"'),
        ("the of and", '"the" OR "of" OR "and"'),  # only stop words: keep them
        ("!!! ---", None),
    ],
)
def test_match_expression_quotes_every_word(text: str, expected: str | None) -> None:
    assert match_expression(text) == expected


def test_text_search_prunes_common_words_but_keeps_the_rarest(tmp_path: Path) -> None:
    conn, _ = connect_sqlite(tmp_path / "t.db")
    conn.execute("CREATE TABLE memories (pk INTEGER PRIMARY KEY, information TEXT);")
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(information, content='memories', "
        "content_rowid='pk', tokenize='porter unicode61 remove_diacritics 2')"
    )
    rows = [(i, f"common filler text number {i}") for i in range(1, 12_001)]
    rows.append((20_000, "common filler about regressions in similarity"))
    conn.executemany("INSERT INTO memories VALUES (?, ?)", rows)
    conn.executemany("INSERT INTO memory_fts(rowid, information) VALUES (?, ?)", rows)
    searcher = TextSearcher(conn)
    assert (
        searcher.expression("Common regressed SIMILARITY zzz") == '"regressed" OR "similarity"'
    )  # df 1 each, query order
    assert searcher.search("common similarity regressed", 5) == [20_000]
    assert searcher.expression("zzz qqq") is None
    conn.close()
