"""Tests close the SQLite connections they open by hand (issue #43): ``with sqlite3.connect(p) as
conn:`` commits but leaves the connection open — a leaked connection once failed CI (a
ResourceWarning made an error, a file still locked). Tests open such files through
``support.sqlitedb.sqlite_conn``, which commits and closes."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from support.sqlitedb import sqlite_conn

ROOT = Path(__file__).resolve().parent.parent
#: a connection used by a ``with`` that only commits, or used once and dropped (``connect(p).execute``)
LEAKS = re.compile(r"with\s+sqlite3\.connect\(|sqlite3\.connect\([^()]*\)\.\w")


def test_no_test_bench_or_tool_leaves_a_sqlite_connection_open():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for folder in ("tests", "bench", "tools") for path in sorted((ROOT / folder).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if LEAKS.search(line) and path.name != Path(__file__).name]
    assert found == [], ("open the file with support.sqlitedb.sqlite_conn (tests) or "
                         "contextlib.closing plus conn.commit() (bench, tools):\n" + "\n".join(found))


def test_the_checker_sees_both_leaks():
    assert LEAKS.search("    with sqlite3.connect(db) as conn:")
    assert LEAKS.search('    rows = sqlite3.connect(db).execute("SELECT 1").fetchall()')
    assert not LEAKS.search("    with closing(sqlite3.connect(db)) as conn:")
    assert not LEAKS.search("    with sqlite_conn(db) as conn:")


def test_a_block_is_committed_and_its_connection_closed(tmp_path):
    db = tmp_path / "t.db"
    with sqlite_conn(db) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
    with sqlite_conn(db) as other:
        assert other.execute("SELECT x FROM t").fetchall() == [(1,)]


def test_a_block_that_raises_is_rolled_back_and_its_connection_closed(tmp_path):
    db = tmp_path / "t.db"
    with sqlite_conn(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(RuntimeError), sqlite_conn(db) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("the block failed")
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
    with sqlite_conn(db) as other:
        assert other.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_a_read_only_uri_is_passed_through(tmp_path):
    db = tmp_path / "t.db"
    with sqlite_conn(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(sqlite3.OperationalError, match="readonly"), \
            sqlite_conn(f"file:{db}?mode=ro", uri=True) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
