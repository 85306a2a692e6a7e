"""A run's fingerprint and notes and a scorer summary's details typed as JSON (issue 43): read
and written as objects (:class:`~evalloop.history.models.JSONObject`, read as models in
:mod:`evalloop.history.details`), not as text each reader parsed.

Every stored value is checked first: one that is not a JSON object (unreadable text, or JSON that
is not an object — no evalloop wrote such a value, but a hand edit or a damaged row may hold one)
becomes ``{}``, and the migration says how many did. Then, on PostgreSQL, the columns become
``JSON`` (``ALTER COLUMN … TYPE JSON USING col::json``); on SQLite nothing else changes: SQLite
keeps JSON as text either way, and the columns keep the ``VARCHAR`` every SQLite history has (no
table copy). Older evalloops read schema version 4: they do not write JSON columns, so they refuse
to write here. The downgrade turns the columns back into ``VARCHAR`` on PostgreSQL (the text each
value had, compact JSON) and is a no-op on SQLite.

Revision 0005, after 0004.
"""

from __future__ import annotations

import json
import logging

import sqlalchemy as sa
from alembic import op

from evalloop.history import version

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: the JSON object columns, by table (and the key their rows are found by)
COLUMNS = {"runs": ("id", sa.String, ("fingerprint", "notes")),
           "scorer_summaries": ("id", sa.Integer, ("details",))}

log = logging.getLogger(__name__)


def _is_object(text: str | None) -> bool:
    try:
        return isinstance(json.loads(text or ""), dict)
    except ValueError:
        return False


def repair_non_objects(conn: sa.Connection) -> int:
    """Set ``'{}'`` where a JSON object column holds anything else; returns how many values were."""
    repaired = 0
    for name, (key, key_type, columns) in COLUMNS.items():
        table = sa.table(name, sa.column(key, key_type), *(sa.column(c, sa.String) for c in columns))
        for column in columns:
            # as text: a database stamped by its columns may have the JSON type already (PostgreSQL)
            rows = conn.execute(sa.select(table.c[key], sa.cast(table.c[column], sa.Text)))
            bad = [row_key for row_key, text in rows if not _is_object(text)]
            for row_key in bad:
                conn.execute(table.update().where(table.c[key] == row_key).values({column: "{}"}))
            repaired += len(bad)
    return repaired


def upgrade() -> None:
    conn = op.get_bind()
    repaired = repair_non_objects(conn)
    if repaired:
        log.warning("revision 0005: %d stored fingerprint, notes or details value(s) were not a JSON object; "
                    "they are now {}", repaired)
    if conn.dialect.name == "postgresql":
        for name, (_, _, columns) in COLUMNS.items():
            for column in columns:
                op.execute(f"ALTER TABLE {name} ALTER COLUMN {column} TYPE JSON USING {column}::json")
    version.write_legacy(conn, 4)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        for name, (_, _, columns) in COLUMNS.items():
            for column in columns:
                op.execute(f"ALTER TABLE {name} ALTER COLUMN {column} TYPE VARCHAR USING {column}::text")
    version.write_legacy(conn, 3)
