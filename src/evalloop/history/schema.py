"""Creating and migrating tables safely when many processes open a fresh database at once.

Every table evalloop keeps (history, locks, ledger, APScheduler's job store) is created
through :func:`ensure_tables`. On PostgreSQL the DDL runs in one transaction under an advisory
lock, so creators queue up; on SQLite (DDL there is not serialised by the driver) a creator that
loses the race sees "already exists" / "database is locked" and tries again, and the second try
finds the tables (``checkfirst``). Any other failure, or a race that outlasts ``timeout``,
becomes one :class:`~evalloop.errors.StoreError` line naming the real cause.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from sqlalchemy import MetaData, Table, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from evalloop.errors import RACE_MARKERS, db_message, store_error

#: one advisory-lock key for all of evalloop's DDL on a PostgreSQL database
ADVISORY_KEY = 0x6576616C6C6F6F70 & 0x7FFFFFFFFFFFFFFF  # "evalloop"
Migration = Callable[[Connection], None]


def is_race(exc: BaseException) -> bool:
    """Whether a DDL error is what a concurrent creator of the same schema causes."""
    low = db_message(exc).lower()
    return any(marker in low for marker in RACE_MARKERS)


def ensure_tables(engine: Engine, metadata: MetaData, *, tables: Sequence[Table] | None = None,  # type: ignore[explicit-any]  # SQLAlchemy 2.1's Table defaults its columns to Column[Any]
                  migrate: Migration | None = None, store: str = "history database",
                  where: str | None = None, timeout: float = 60.0, exclusive: bool = False) -> None:
    """Create the missing tables (and run ``migrate``) so that concurrent callers all succeed.
    ``exclusive``: on SQLite, take the write lock first (``BEGIN IMMEDIATE``), so what ``migrate``
    reads cannot change before it writes (the driver would begin only at the first write)."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        try:
            with engine.begin() as conn:
                if engine.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_KEY})
                elif exclusive and engine.dialect.name == "sqlite":
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                metadata.create_all(conn, tables=list(tables) if tables is not None else None,
                                    checkfirst=True)
                if migrate is not None:
                    migrate(conn)
            return
        except (DBAPIError, SQLAlchemyError) as exc:
            if not is_race(exc) or time.monotonic() > deadline:
                raise store_error(exc, store=store, where=where or str(engine.url)) from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)


class TableJobStore(Protocol):
    """What :func:`ensure_job_store` reads of APScheduler's ``SQLAlchemyJobStore`` (untyped)."""

    jobs_t: Table  # type: ignore[explicit-any]  # SQLAlchemy 2.1's Table defaults its columns to Column[Any]
    engine: Engine


def ensure_job_store(job_store: TableJobStore) -> None:
    """Create APScheduler's ``SQLAlchemyJobStore`` table race-free before the store starts
    (its own ``start()`` then finds the table and creates nothing)."""
    ensure_tables(job_store.engine, job_store.jobs_t.metadata, tables=[job_store.jobs_t], store="schedule job store")
