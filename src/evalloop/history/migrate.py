"""``evalloop history migrate``: bring a history database to this evalloop's schema, explicitly.

On a shared server nothing else migrates (:mod:`evalloop.history.version`): run it once, from
one host, after every host that writes to the database has the new evalloop. It creates the
missing tables, adds missing columns and indexes (columns are only ever added), and stamps
the schema version, in one transaction under the DDL advisory lock. A newer schema is never
touched.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from evalloop.history import version
from evalloop.history.engine import forget, migrate_history_tables, new_engine, store_where
from evalloop.history.locks import add_lock_columns
from evalloop.history.models import metadata
from evalloop.history.schema import ensure_tables


def migrate(url: str) -> tuple[int | None, int]:
    """Migrate the database at ``url``: (its version before — None when it was empty, 0 when
    made before schema versions — and the version now)."""
    engine = new_engine(url)
    where = store_where(url)
    try:
        before = version.stored_version(engine)
        if before is not None and before > version.SCHEMA_VERSION:
            version.check(engine, where)  # raises: a newer schema is never downgraded

        def steps(conn: Connection) -> None:
            migrate_history_tables(conn)
            add_lock_columns(conn)
            version.stamp(conn)

        ensure_tables(engine, metadata, migrate=steps, where=where)
    finally:
        engine.dispose()
    forget(url)
    return before, version.SCHEMA_VERSION
