"""Each Slurm run of a job, with Slurm's start, its nodes and why it ended.

A requeue starts a new run of the same Slurm job; ``hops show`` lists them
(profiling runs, moves, preemptions, the last run's end) and the status page
draws them as a timeline. Jobs adopted before this revision have no runs
recorded before the upgrade.

``jobs.restart_s`` is a restart measured whole (hops's decision to stop the
job to its first iteration after it: the checkpoint, the requeue, the wait
for a release, Slurm's launch, the job's start-up); ``jobs.model_restart_s``
the median of earlier jobs of the same model when the job was adopted. The
planner prices moves at these, the replay charges them.

Revision ID: 0011
Revises: 0010
Created: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("gpu_type", sa.String(length=64), nullable=True),
        sa.Column("parts", sa.JSON(), nullable=True),
        sa.Column("start_time", sa.Float(), nullable=False),
        sa.Column("end_time", sa.Float(), nullable=True),
        sa.Column("ended", sa.String(length=32), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_runs_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("job_id", "run", name=op.f("uq_runs_job_id_run")),
    )
    op.create_index(op.f("ix_runs_start_time"), "runs", ["start_time"], unique=False)
    op.add_column("jobs", sa.Column("restart_s", sa.Float(), nullable=True))
    op.add_column("jobs", sa.Column("model_restart_s", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "model_restart_s")
    op.drop_column("jobs", "restart_s")
    op.drop_index(op.f("ix_runs_start_time"), table_name="runs")
    op.drop_table("runs")
