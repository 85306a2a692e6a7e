"""The revision a history database is at, checked once per process, cheaply.

A history on a database server is shared by every host of a team, and hosts are upgraded one
by one. So the database says which migration it is at (Alembic's ``alembic_version`` row,
:mod:`evalloop.history.migrations`), and a process reads it once when it first opens the
database (one SELECT, no DDL, no lock): at this evalloop's :data:`HEAD` it goes on; a database at
another revision is never written — an older one waits for ``evalloop history migrate``
(migrations are explicit, never implicit on a shared server), a newer one for this host's
evalloop to be upgraded. An empty database gets the current schema, stamped. (A SQLite file is
one host's: it is still migrated when opened.)

Evalloops before numbered migrations read a schema version instead (one row of
``evalloop_schema``) and refuse to write at another: each migration that changes what they
would write sets it (:func:`write_legacy`), so they keep refusing a database they no longer fit.
"""

from __future__ import annotations

import time
from typing import Final, Literal

from sqlalchemy import inspect, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from evalloop.errors import EvalloopError
from evalloop.history.models import HISTORY_TABLES, AlembicVersion, SchemaVersion

#: every migration, oldest first (``tests/test_migrations.py`` checks it against the scripts):
#: 0001 f3594c2's tables; 0002 issue 24/27/28 (4e61118); 0003 issue 36/39; 0004 ``accepted``
REVISIONS: Final = ("0001", "0002", "0003", "0004", "0005")
#: the revision this evalloop writes: a new database is created at it, any other is migrated to it
HEAD: Final = REVISIONS[-1]
#: the schema version older evalloops read, at :data:`HEAD` (their last one was 2)
LEGACY_VERSION: Final = 4
#: what :func:`revision_of` says of a database with evalloop tables and no ``alembic_version``
PRE_ALEMBIC: Final = "pre-alembic"
SCHEMA = SchemaVersion.__table__
STAMP = AlembicVersion.__table__
ROW = "history"
#: the history's own tables: any of them makes a database evalloop's (to be migrated, not created)
HISTORY_NAMES = frozenset(t.name for t in HISTORY_TABLES)


class SchemaMismatch(EvalloopError):
    """The shared database is at another revision than this evalloop writes."""

    exit_code = 2


def _evalloop_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("evalloop")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


def revision_of(conn: Connection) -> str | None:
    """The database's revision: None for a database without evalloop tables, :data:`PRE_ALEMBIC`
    for tables made before numbered migrations. (Tables and stamp are committed together, so a
    database whose tables exist already shows its stamp.)"""
    # the tables in one catalog read: on a server, separate reads can fall on either side of a
    # concurrent creator's commit (no runs table, then every table) and see a half-made history
    names = set(inspect(conn).get_table_names())
    if "runs" not in names:  # no history yet: unless an older evalloop left part of one
        return PRE_ALEMBIC if names & HISTORY_NAMES else None
    if STAMP.name not in names:
        return PRE_ALEMBIC
    found = conn.execute(select(STAMP.c.version_num)).scalar()
    return PRE_ALEMBIC if found is None else str(found)


def stored_revision(engine: Engine) -> str | None:
    """:func:`revision_of` on a connection of its own."""
    with engine.connect() as conn:
        return revision_of(conn)


def head_is_stored(engine: Engine) -> bool:
    """Whether the database is stamped at :data:`HEAD`: one SELECT, no catalog lookup (anything
    unexpected, a missing table included, says no and the full check runs)."""
    try:
        with engine.connect() as conn:
            return conn.execute(select(STAMP.c.version_num)).scalar() == HEAD
    except SQLAlchemyError:  # missing, locked, damaged: the full check says what is wrong
        return False


def raise_if_newer(found: str, where: str) -> None:
    """Refuse a revision this evalloop does not know: a newer evalloop migrated the database."""
    if found not in (*REVISIONS, "base", PRE_ALEMBIC):
        raise SchemaMismatch(f"the history database is at revision {found}, which this evalloop "
                             f"({_evalloop_version()}, revision {HEAD}) does not know: a newer one migrated it",
                             where=where, hint="upgrade evalloop on this host (pip install -U evalloop); "
                                               "nothing was written")


def check(engine: Engine, where: str) -> Literal["current", "empty"]:
    """'current', or 'empty' (no evalloop tables yet: create them); else :class:`SchemaMismatch`."""
    found = stored_revision(engine)
    if found is None:
        return "empty"
    if found == HEAD:
        return "current"
    raise_if_newer(found, where)
    was = "was made before numbered migrations" if found == PRE_ALEMBIC else f"is at revision {found}"
    raise SchemaMismatch(f"the history database {was}; this evalloop ({_evalloop_version()}) writes revision {HEAD}",
                         where=where,
                         hint="run `evalloop history migrate` once, from one host, after upgrading every "
                              "host that writes to it; nothing was written")


def write_legacy(conn: Connection, number: int = LEGACY_VERSION) -> None:
    """Set the schema version older evalloops read (in the migrating transaction); the table is
    created where they left none (they made it on a shared server only)."""
    SCHEMA.create(conn, checkfirst=True)
    values = {"version": number, "written_by": _evalloop_version()[:40], "migrated_at": time.time()}
    done = conn.execute(SCHEMA.update().where(SCHEMA.c.name == ROW).values(**values))
    if done.rowcount == 0:
        conn.execute(SCHEMA.insert().values(name=ROW, **values))
