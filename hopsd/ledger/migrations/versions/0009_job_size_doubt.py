"""Jobs keep why hops stopped believing their claimed size (empty while it is believed).

The core's size check (:mod:`hopsd.core.sizeclaim`) doubts a claim its run time
or progress contradicts; the verdict is sticky, so a restarted hopsd keeps
planning the job from its time limit or progress, and ``hops show`` says why.

Revision ID: 0009
Revises: 0008
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("size_doubt", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    # Native DROP COLUMN (SQLite >= 3.35), as in 0002: no batch table copy.
    op.drop_column("jobs", "size_doubt")
