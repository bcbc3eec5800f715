"""Jobs remember the latest input of theirs hopsd refused, and why.

hopsd reads data users control (tags, probe reports, progress files, working
directories); what it refuses, or any failure it contains to one job, is kept
on the job's row so ``hops status`` can show the owner what went wrong.

Revision ID: 0003
Revises: 0002
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("input_problem", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    # Native DROP COLUMN (SQLite >= 3.35), as in 0002: no batch table copy.
    op.drop_column("jobs", "input_problem")
