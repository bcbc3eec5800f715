"""Jobs keep the hops tag they were adopted with, and their Slurm job name.

A job's Slurm comment stays editable by its owner after adoption; the GPU-type
constraints (``--types``, ``--exclude-types``) and ``--no-preempt`` are read
from this copy, so an edited comment changes nothing (hopsd reports it to the
owner instead). Rows adopted before this revision record the tag Slurm shows at
the first tick after the upgrade. ``name`` is what ``squeue`` calls the job
(the script's file name unless ``-J`` gave another): ``hops status`` shows it.

Revision ID: 0010
Revises: 0009
Created: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("adopted_tag", sa.Text(), nullable=False, server_default=""))
    op.add_column("jobs", sa.Column("name", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("jobs", "name")
    op.drop_column("jobs", "adopted_tag")
