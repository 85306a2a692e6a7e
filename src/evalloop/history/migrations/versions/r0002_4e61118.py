"""What came before 4e61118: a run's prompt-cache and batch counts and the batches it submitted
(issue 27), a target's traceback on its case result (issue 24), the schema version older
evalloops read on a shared server (issue 28, version 1).

Revision 0002, after 0001.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from evalloop.history import version
from evalloop.history.migrations import add_missing_columns, drop_columns

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

RUN_COLUMNS = ("cache_write_tokens", "cache_read_tokens", "batched_calls")


def upgrade() -> None:
    add_missing_columns("runs", [(name, "INTEGER") for name in RUN_COLUMNS])
    add_missing_columns("case_results", [("traceback", "VARCHAR")])
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("run_batches"):
        op.create_table("run_batches", sa.Column("id", sa.Integer, primary_key=True),
                        sa.Column("run_id", sa.String, sa.ForeignKey("runs.id"), nullable=False),
                        sa.Column("provider", sa.String, nullable=False),
                        sa.Column("batch_id", sa.String, nullable=False),
                        sa.Column("custom_ids", sa.String, nullable=False),
                        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False))
        op.create_index("ix_run_batches_run_id", "run_batches", ["run_id"])
    version.write_legacy(op.get_bind(), 1)  # creates evalloop_schema (issue 28 made it on servers only)


def downgrade() -> None:
    op.drop_table("evalloop_schema")
    op.drop_index("ix_run_batches_run_id", "run_batches")
    op.drop_table("run_batches")
    drop_columns("case_results", ["traceback"])
    drop_columns("runs", RUN_COLUMNS)
