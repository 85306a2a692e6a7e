"""The history's numbered migrations (Alembic), run on the connection evalloop already opened.

The scripts are in ``versions/`` (``r0001_…``, ``r0002_…``, one per schema change, each with its
``downgrade``); ``env.py`` runs them on the connection it is handed (``config.attributes``), so no
``alembic.ini`` is read at run time. :func:`bring_up_to_date` is the one way a database reaches
this evalloop's schema, in the caller's transaction:

- no evalloop tables: every table is created from the models and stamped at the head revision
  (Alembic is not even imported: a new database costs one transaction);
- stamped by Alembic: upgraded to the head; a revision this evalloop does not know (a newer
  evalloop migrated it) is refused, nothing written;
- made before numbered migrations (no ``alembic_version``): stamped at the revision its columns
  show (:func:`inferred_revision`), then upgraded.

For developers: ``alembic -c src/evalloop/history/migrations/alembic.ini revision -m "…"`` writes a
new script from ``script.py.mako``; add its number to :data:`~evalloop.history.version.REVISIONS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from evalloop.history import version
from evalloop.history.models import AlembicVersion, metadata

if TYPE_CHECKING:
    from alembic.config import Config

#: where the scripts are (``script_location``)
HERE = Path(__file__).parent
#: a column only a revision added, by revision, newest first: what a database made before
#: numbered migrations shows of its revision (0001 is f3594c2's schema, or anything older)
MARKERS = (("0003", "case_results", "output_sha256"), ("0002", "runs", "cache_write_tokens"))


def config(conn: Connection) -> Config:
    """Alembic's configuration for this connection, built in code (no ``alembic.ini``)."""
    from alembic.config import Config

    found = Config()
    found.set_main_option("script_location", str(HERE))
    found.attributes["connection"] = conn
    return found


def upgrade(conn: Connection, target: str = "head") -> None:
    """Run the migrations up to ``target`` on this connection (in its transaction)."""
    from alembic import command

    command.upgrade(config(conn), target)


def downgrade(conn: Connection, target: str) -> None:
    """Undo the migrations down to ``target`` (``"base"``: every table dropped)."""
    from alembic import command

    command.downgrade(config(conn), target)


def revisions() -> list[str]:
    """Every revision of the scripts, oldest first (what :data:`version.REVISIONS` must say)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(HERE))
    return [s.revision for s in reversed(list(scripts.walk_revisions()))]


def inferred_revision(conn: Connection) -> str | None:
    """The revision a database made before numbered migrations is at, by its columns: the newest
    revision whose marker column it has, when it holds all of f3594c2's tables and columns; None
    (base) when it lacks any, so that every step runs (each adds only what is missing)."""
    from evalloop.history.migrations.baseline import tables

    inspector = inspect(conn)
    present = {name: {c["name"] for c in inspector.get_columns(name)} for name in inspector.get_table_names()}
    frozen = tables()
    if not all(t.name in present and {c.name for c in t.columns} <= present[t.name] for t in frozen.sorted_tables):
        return None
    for revision, table, column in MARKERS:
        if column in present.get(table, set()):
            return revision
    return "0001"


def create_current(conn: Connection) -> None:
    """Create every evalloop table from the models, stamped at the head revision."""
    metadata.create_all(conn, checkfirst=True)
    stamp(conn, version.HEAD)
    version.write_legacy(conn)


def stamp(conn: Connection, revision: str | None) -> None:
    """Record the revision the database is at (None: none, Alembic's base)."""
    table = AlembicVersion.__table__
    AlembicVersion.__table__.create(conn, checkfirst=True)
    conn.execute(table.delete())
    if revision is not None:
        conn.execute(table.insert().values(version_num=revision))


def bring_up_to_date(conn: Connection, where: str) -> str | None:
    """Create or migrate the database to :data:`version.HEAD` in the caller's transaction; returns
    the revision it was at (None: empty; ``"pre-alembic:<revision>"`` for one stamped here by its
    columns). Raises :class:`~evalloop.history.version.SchemaMismatch` for an unknown revision."""
    found = version.revision_of(conn)
    if found is None:
        create_current(conn)
        return None
    before = found
    if found == version.PRE_ALEMBIC:
        inferred = inferred_revision(conn)
        stamp(conn, inferred)
        found = inferred or "base"
        before = f"{version.PRE_ALEMBIC}:{found}"
    if found == version.HEAD:
        return before
    version.raise_if_newer(found, where)
    upgrade(conn)
    return before


def add_missing_columns(table: str, columns: Iterable[tuple[str, str]]) -> None:
    """For a migration: add these columns (name, SQL type) that the table lacks, nullable.
    A database stamped by its columns may already have some (an evalloop between two revisions)."""
    from alembic import op

    conn = op.get_bind()
    present = {c["name"] for c in inspect(conn).get_columns(table)}
    for name, sql_type in columns:
        if name not in present:
            op.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")


def drop_columns(table: str, names: Iterable[str]) -> None:
    """For a downgrade: drop these columns with ``ALTER TABLE … DROP COLUMN`` (SQLite ≥ 3.35 has
    it; batch mode would copy the table, and a copy of ``runs`` cannot be swapped in while other
    tables' foreign keys point at it). A change of a column's type or nullability goes through
    ``op.batch_alter_table`` instead (``env.py`` renders new scripts so)."""
    from alembic import op

    conn = op.get_bind()
    present = {c["name"] for c in inspect(conn).get_columns(table)}
    for name in names:
        if name in present:
            op.drop_column(table, name)
