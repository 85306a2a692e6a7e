"""Whether ``evalloop accept`` made a scorer of a run the new normal, as a column of its summary
(``scorer_summaries.accepted``), filled from the acceptance each summary's details record: the last
acceptance is then found by an equality, not a text search in JSON. Older evalloops read schema
version 3 (they do not write the column: they refuse to write here).

Revision 0004, after 0003.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from evalloop.history import version
from evalloop.history.migrations import add_missing_columns, drop_columns

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_missing_columns("scorer_summaries", [("accepted", "BOOLEAN")])
    conn = op.get_bind()
    summaries = sa.table("scorer_summaries", sa.column("id", sa.Integer), sa.column("details", sa.String),
                         sa.column("accepted", sa.Boolean))
    # as text: a database stamped here by its columns may already have 0005's JSON type (PostgreSQL)
    details = sa.cast(summaries.c.details, sa.Text)
    marked = conn.execute(sa.select(summaries.c.id, details).where(details.contains('"accepted"'))).all()
    for row_id, details in marked:
        try:
            found = json.loads(details or "{}").get("accepted")
        except (ValueError, AttributeError):
            continue
        if isinstance(found, dict):
            conn.execute(summaries.update().where(summaries.c.id == row_id).values(accepted=True))
    version.write_legacy(conn, 3)


def downgrade() -> None:
    drop_columns("scorer_summaries", ["accepted"])
    version.write_legacy(op.get_bind(), 2)
