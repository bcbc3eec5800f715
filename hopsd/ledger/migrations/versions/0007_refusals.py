"""Jobs hopsd refused at adoption, with the reason, so their owners see why.

A tagged job hopsd will not schedule (a demand no partition can hold, a size
below one batch, a tag it cannot trust) has no row in ``jobs``; it stays held
in Slurm. ``refusals`` keeps one row per such Slurm job while Slurm still
knows it, so ``hops status`` shows it with hopsd's reason instead of nothing.

Revision ID: 0007
Revises: 0006
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "refusals",
        sa.Column("slurm_job_id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("refused_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("refusals")
