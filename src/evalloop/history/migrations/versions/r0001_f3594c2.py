"""The history as evalloop f3594c2 made it: runs, scorer summaries, case results and scores, score
vectors, calibrations, locks, fire claims, the schedule ledger.

Revision 0001, the first. On a database older than f3594c2 (stamped at none by its columns) it
creates the tables missing and adds the columns missing, nullable.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from evalloop.history.migrations import add_missing_columns
from evalloop.history.migrations.baseline import tables

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    frozen = tables()
    inspector = sa.inspect(conn)
    for table in frozen.sorted_tables:
        if not inspector.has_table(table.name):
            table.create(conn)
            continue
        add_missing_columns(table.name, [(c.name, c.type.compile(dialect=conn.dialect)) for c in table.columns])
        indexes = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexes:
                index.create(conn)


def downgrade() -> None:
    conn = op.get_bind()
    for table in reversed(tables().sorted_tables):
        table.drop(conn, checkfirst=True)
