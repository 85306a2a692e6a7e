"""The schema version of a shared history database, checked once per process, cheaply.

A history on a database server is shared by every host of a team, and hosts are upgraded one
by one. So the database says which schema it is at (one row of ``evalloop_schema``), and a
process reads it once when it first opens the database (one SELECT, no DDL, no lock): at this
evalloop's :data:`SCHEMA_VERSION` it goes on; a database at another version is never written —
an older one waits for ``evalloop history migrate`` (migrations are explicit, never implicit on a
shared server), a newer one for this host's evalloop to be upgraded. An empty database gets
the current schema, stamped. (A SQLite file is one host's: it is still migrated when opened.)
"""

from __future__ import annotations

import time
from typing import Literal

from sqlalchemy import inspect, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from evalloop.errors import EvalloopError
from evalloop.history.models import SchemaVersion

#: the version of every evalloop table this evalloop writes; bump it with any table change
#: (1: the first stamped schema — runs, summaries, case rows, vectors, calibrations, locks,
#: fire claims, the schedule ledger; 2: a run's product fingerprint and bridge link, a scorer
#: summary's measurement — issue 36; case_results.output_bytes and output_sha256 — issue 39)
SCHEMA_VERSION = 2
SCHEMA = SchemaVersion.__table__
ROW = "history"


class SchemaMismatch(EvalloopError):
    """The shared database is at another schema version than this evalloop writes."""

    exit_code = 2


def _evalloop_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("evalloop")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


def stored_version(engine: Engine) -> int | None:
    """The database's schema version: None for a database without evalloop tables, 0 for
    tables made before schema versions existed. (Tables and stamp are committed together, so
    a database whose tables exist already shows its stamp.)"""
    with engine.connect() as conn:
        if not inspect(conn).has_table("runs"):
            return None
    try:
        with engine.connect() as conn:
            found = conn.execute(select(SCHEMA.c.version).where(SCHEMA.c.name == ROW)).scalar()
    except ProgrammingError:  # no version table: made by an evalloop before schema versions
        return 0
    except OperationalError as exc:  # SQLite says so this way (an unreachable server is raised)
        if "no such table" not in str(exc):
            raise
        return 0
    return 0 if found is None else int(found)


def check(engine: Engine, where: str) -> Literal["current", "empty"]:
    """'current', or 'empty' (no evalloop tables yet: create them); else :class:`SchemaMismatch`."""
    found = stored_version(engine)
    if found is None:
        return "empty"
    if found == SCHEMA_VERSION:
        return "current"
    mine = f"the history database is at schema version {found}; this evalloop ({_evalloop_version()}) " \
           f"writes version {SCHEMA_VERSION}"
    if found > SCHEMA_VERSION:
        raise SchemaMismatch(f"{mine}, an older one",
                             where=where, hint="upgrade evalloop on this host (pip install -U evalloop); "
                                               "nothing was written")
    raise SchemaMismatch(mine, where=where,
                         hint="run `evalloop history migrate` once, from one host, after upgrading every "
                              "host that writes to it; nothing was written")


def stamp(conn: Connection) -> None:
    """Record that the database is at this evalloop's schema version (in the migrating transaction)."""
    values = {"version": SCHEMA_VERSION, "written_by": _evalloop_version()[:40], "migrated_at": time.time()}
    done = conn.execute(SCHEMA.update().where(SCHEMA.c.name == ROW).values(**values))
    if done.rowcount == 0:
        conn.execute(SCHEMA.insert().values(name=ROW, **values))


def stamp_if_absent(conn: Connection) -> None:
    """Stamp a database that was just created (a concurrent creator may have stamped it)."""
    if conn.execute(select(SCHEMA.c.version).where(SCHEMA.c.name == ROW)).scalar() is None:
        stamp(conn)
