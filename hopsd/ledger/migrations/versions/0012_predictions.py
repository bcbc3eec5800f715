"""What hopsd predicted of each job's start and end, when it predicted it.

``hops status`` shows the newest prediction of each job (START for a waiting
job, ETA for a running one); every prediction shown is a row here, so what
hops said can be set beside what happened (``benchmarks/predictions.py``).
A row is written when a round's forecast differs from the job's last one.

Revision ID: 0012
Revises: 0011
Created: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "predictions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("made_at", sa.Float(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("start_at", sa.Float(), nullable=True),
        sa.Column("end_at", sa.Float(), nullable=True),
        sa.Column("gpu_type", sa.String(length=64), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_predictions_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_predictions")),
    )
    op.create_index(
        op.f("ix_predictions_job_id_made_at"), "predictions", ["job_id", "made_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_predictions_job_id_made_at"), table_name="predictions")
    op.drop_table("predictions")
