"""Opening a history database: one engine per URL, the driver for it, SQLite's pragmas, the
pool of a database server, the schema check (a SQLite file stamped at this evalloop's revision
opens after one SELECT, an older one is migrated; a shared server's database is checked by its
revision once per process, :mod:`evalloop.history.version`, and migrated only by
:func:`~evalloop.history.migrate.migrate`), and how messages name the database.
"""

from __future__ import annotations

import weakref
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry

from evalloop.errors import ConfigError, StoreError, access_error, store_error
from evalloop.history import migrations, version
from evalloop.history.models import dumps, metadata
from evalloop.history.schema import ensure_tables
from evalloop.redact import redact_url

_ENGINES: dict[str, Engine] = {}
_VERIFIED: weakref.WeakSet[Engine] = weakref.WeakSet()
#: a database server's pool per process, unless the URL says otherwise (``?pool_size=``,
#: ``&max_overflow=``): an evalloop process needs few connections, and a team has many processes
POOL_DEFAULTS = {"pool_size": 2, "max_overflow": 4}
_POOL_KEYS = ("pool_size", "max_overflow", "pool_recycle", "pool_timeout")


def available_driver(parsed: URL) -> URL:
    """``postgresql://`` means SQLAlchemy's default driver (psycopg2); use psycopg 3 if only it is here."""
    import importlib.util

    if parsed.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None \
            and importlib.util.find_spec("psycopg") is not None:
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def get_engine(url: str) -> Engine:
    """One engine per URL; SQLite files get WAL and their folder created; a server's schema
    version is checked once (:class:`~evalloop.history.version.SchemaMismatch` when it differs)."""
    engine = _ENGINES.get(url)
    if engine is not None:
        return engine
    engine = new_engine(url)
    where = store_where(url)
    try:
        if engine.dialect.name == "sqlite":
            if not version.head_is_stored(engine):
                bring_up_to_date(engine, where)
        else:
            try:
                state = version.check(engine, where)
            except (DBAPIError, SQLAlchemyError) as exc:  # unreachable, refused, ...: one line
                raise store_error(exc, store="history database", where=where) from None
            if state == "empty":  # a new database: every table, stamped (a concurrent creator waits)
                bring_up_to_date(engine, where)
        _VERIFIED.add(engine)
    except (StoreError, version.SchemaMismatch) as exc:
        engine.dispose()
        if "is damaged" in exc.what:
            exc.hint = recovery_hint(url)
        raise
    _ENGINES[url] = engine
    return engine


def verified(engine: Engine) -> bool:
    """Whether every evalloop table of this engine's database is known to be there (it is at this
    evalloop's revision): the lock and ledger tables then need no check of their own."""
    return engine in _VERIFIED


def forget(url: str) -> None:
    """Drop this process's engine for the URL (after a migration: the next open checks again)."""
    stale = _ENGINES.pop(url, None)
    if stale is not None:
        _VERIFIED.discard(stale)
        stale.dispose()


def new_engine(url: str) -> Engine:
    """An engine for the URL (no schema check): SQLite's pragmas, a server's modest pool."""
    try:
        parsed = make_url(url)
    except Exception:
        raise ConfigError(f"'{redact_url(url)}' is not a database URL",
                          hint="use e.g. sqlite:///history/evalloop.db or postgresql://…") from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # a file this process may not write fails here, in one line that says why, before any write
        problem = access_error(parsed.database, store="history database")
        if problem is not None:
            raise problem
    parsed = available_driver(parsed)
    options: dict[str, object] = {}
    if parsed.get_backend_name() == "sqlite":
        options["connect_args"] = {"timeout": 30}
    else:
        # JSON columns (history.models.JSONObject) written as SQLite writes them: compact, any value as its text
        options = {**POOL_DEFAULTS, "pool_pre_ping": True, "json_serializer": dumps}
        for key in _POOL_KEYS:
            if key in parsed.query:
                options[key] = int(str(parsed.query[key]))
        parsed = parsed.difference_update_query(_POOL_KEYS)
    try:
        engine = create_engine(parsed, **options)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"the database driver '{exc.name}' for this URL is not installed", where=redact_url(url),
                          hint=f"pip install {exc.name}") from None
    if parsed.get_backend_name() == "sqlite":
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
    return engine


def store_where(url: str) -> str:
    """How a message names a history database: its file for SQLite, else its URL (redacted)."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - not a URL: say it as given, redacted
        return redact_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return str(parsed.database)
    return redact_url(url)


def recovery_hint(url: str) -> str:
    """How to recover a damaged history database: move it aside and rebuild from the run logs."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return ("run `evalloop doctor --repair`: it moves the file aside (with its -wal/-shm files) and "
                "rebuilds it from the run logs (`evalloop history import`)")
    return "restore it from a backup, or run `evalloop doctor`"


def bring_up_to_date(engine: Engine, where: str) -> str | None:
    """Create or migrate the database to this evalloop's revision, in one transaction (on SQLite a
    ``BEGIN IMMEDIATE`` one, so a second process opening it at once waits, then finds it done);
    concurrent creators queue or retry (:func:`~evalloop.history.schema.ensure_tables`). Returns
    the revision it was at (:func:`evalloop.history.migrations.bring_up_to_date`)."""
    before: list[str | None] = []

    def steps(conn: Connection) -> None:
        before[:] = [migrations.bring_up_to_date(conn, where)]

    ensure_tables(engine, metadata, tables=(), migrate=steps, where=where, exclusive=True)
    return before[0] if before else None
