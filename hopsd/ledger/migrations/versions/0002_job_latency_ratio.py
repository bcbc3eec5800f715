"""Jobs remember their final latency ratio; finished jobs are found by end time.

RAQLR (the busyness indicator) is the mean latency ratio of jobs that finished
in the last h hours: the column stores each job's ratio when it ends, and the
index on ``end_time`` keeps that window query a range scan.

Revision ID: 0002
Revises: 0001
Created: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("latency_ratio", sa.Float(), nullable=True))
    op.create_index("ix_jobs_end_time", "jobs", ["end_time"], unique=False)


def downgrade() -> None:
    # Native DROP COLUMN (SQLite >= 3.35): a batch table copy would fire the
    # ON DELETE CASCADE of the tables that reference jobs.
    op.drop_index("ix_jobs_end_time", table_name="jobs")
    op.drop_column("jobs", "latency_ratio")
