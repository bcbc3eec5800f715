"""The daemon lease carries a fencing token, raised on every acquisition.

A hopsd that lost the lease (paused, cut off, its clock behind) may still
believe it leads. Every intent batch and every Slurm write first checks, in
the ledger, that the lease still names it with the token it acquired; a
takeover raised the token, so the old leader's check fails and it enacts
nothing.

Revision ID: 0008
Revises: 0007
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from hopsd.ledger.migrations.added_columns import added_columns

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


upgrade, downgrade = added_columns(
    "daemon_lease",
    lambda: [sa.Column("token", sa.Integer(), nullable=False, server_default="0")],
)
