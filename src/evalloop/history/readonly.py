"""Reading a history that cannot be written: a SQLite file on a read-only mount (or read-only
itself) is opened ``mode=ro`` — or ``immutable=1`` when even its WAL index cannot be made — so
``history``, ``report``, ``show`` and ``compare`` still read it; nothing is created or changed.
A PostgreSQL history opened read-only (``evalloop view``) gets sessions whose transactions are
read-only (``default_transaction_read_only``): the server refuses any write, and no table is
created or migrated."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

from evalloop.history.engine import _ENGINES, get_engine, new_engine


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory ones)."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - not a URL
        return None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return Path(parsed.database)
    return None


def cannot_write(url: str) -> bool:
    """Whether a SQLite history exists and can be read but not written here (a read-only mount,
    a file or folder of another user)."""
    from evalloop.access import diagnose

    path = sqlite_path(url)
    if path is None or not path.is_file():
        return False
    problem = diagnose(path)
    return problem is not None and problem.readable  # unreadable: opening says why, in one line


def readonly_engine(url: str) -> Engine:
    """An engine that only reads an existing SQLite history (``history``/``report`` on a
    read-only mount): opened ``mode=ro``, or ``immutable=1`` when even the WAL index cannot be
    made; no pragmas, no schema changes. Other databases are opened as usual."""
    path = sqlite_path(url)
    key = f"ro:{url}"
    if key in _ENGINES:
        return _ENGINES[key]
    if path is None:
        if make_url(url).get_backend_name() != "postgresql":
            return get_engine(url)
        _ENGINES[key] = _readonly_server(url)
        return _ENGINES[key]
    import sqlite3

    uri = path.resolve().as_uri()

    def connect() -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:  # a WAL database whose -shm cannot be created
            return sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)

    engine = create_engine("sqlite://", creator=connect)
    _ENGINES[key] = engine
    return engine


def _readonly_server(url: str) -> Engine:
    """A PostgreSQL engine whose every session is read-only: the server refuses a write."""
    engine = new_engine(url)

    @event.listens_for(engine, "connect")
    def _read_only(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        cur.close()
        dbapi_conn.commit()

    return engine
