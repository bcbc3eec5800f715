"""Checkpoint notices in the intent log; each job's measured restart cost.

A ``notice`` intent is written with the move or preemption it precedes, so the
grace period (its ``grace_s``, and ``sent_at`` once the signal went out) is in
the intent log: a daemon killed during the grace resumes it instead of
requeueing at once or signalling again.

Jobs keep what their probe measured of a restart: ``checkpoint_s`` (saving a
checkpoint) and ``startup_s`` (from a start to the first iteration).

Revision ID: 0006
Revises: 0005
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = "'update', 'release', 'requeue_hold', 'make_eligible', 'cancel', 'hold'"
_AFTER = _BEFORE + ", 'notice'"


def _action_check(values: str) -> None:
    # SQLite changes a CHECK only by copying the table (batch mode); PostgreSQL alters it.
    with op.batch_alter_table("intents") as batch:
        batch.drop_constraint(op.f("ck_intents_action"), type_="check")
        batch.create_check_constraint(op.f("ck_intents_action"), f"action IN ({values})")


def upgrade() -> None:
    _action_check(_AFTER)
    op.add_column("jobs", sa.Column("checkpoint_s", sa.Float(), nullable=True))
    op.add_column("jobs", sa.Column("startup_s", sa.Float(), nullable=True))


def downgrade() -> None:
    # Native DROP COLUMN (SQLite >= 3.35), as in 0002: no batch table copy.
    op.drop_column("jobs", "startup_s")
    op.drop_column("jobs", "checkpoint_s")
    op.execute("DELETE FROM intents WHERE action = 'notice'")
    _action_check(_BEFORE)
