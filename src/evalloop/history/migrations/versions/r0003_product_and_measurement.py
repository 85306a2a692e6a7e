"""A run's product fingerprint and bridge link, a scorer summary's measurement (issue 36), filled
for the runs already there from their stored fingerprints; a capped output's size and hash on its
case result (issue 39). Older evalloops read schema version 2.

Revision 0003, after 0002.
"""

from __future__ import annotations

from alembic import op

from evalloop.history import version
from evalloop.history.identity import backfill
from evalloop.history.migrations import add_missing_columns, drop_columns

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_missing_columns("runs", [("product_fingerprint", "VARCHAR"), ("bridge_of", "VARCHAR")])
    op.create_index("ix_runs_bridge_of", "runs", ["bridge_of"], if_not_exists=True)
    add_missing_columns("scorer_summaries", [("measurement", "VARCHAR")])
    add_missing_columns("case_results", [("output_bytes", "INTEGER"), ("output_sha256", "VARCHAR")])
    backfill(op.get_bind())
    version.write_legacy(op.get_bind(), 2)


def downgrade() -> None:
    drop_columns("case_results", ["output_bytes", "output_sha256"])
    drop_columns("scorer_summaries", ["measurement"])
    op.drop_index("ix_runs_bridge_of", "runs")
    drop_columns("runs", ["product_fingerprint", "bridge_of"])
    version.write_legacy(op.get_bind(), 1)
