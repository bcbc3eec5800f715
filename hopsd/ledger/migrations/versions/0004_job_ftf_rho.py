"""Jobs keep their Themis finish-time fairness (rho) as hopsd last computed it.

``hops fairness`` shows the core's rho (``T_shared / T_independent``, the same
definition the ftf priority plans with), recorded by hopsd every tick, instead
of a figure of its own.

Revision ID: 0004
Revises: 0003
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from hopsd.ledger.migrations.added_columns import added_columns

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


upgrade, downgrade = added_columns(
    "jobs", lambda: [sa.Column("ftf_rho", sa.Float(), nullable=True)]
)
