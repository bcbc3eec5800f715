"""Intents may be a checkpoint notice: the signal hops sends a job before it requeues it.

A ``notice`` intent is written with the move or preemption it precedes, so the
grace period (its ``grace_s``, and ``sent_at`` once the signal went out) is in
the intent log: a daemon killed during the grace resumes it instead of
requeueing at once or signalling again.

Revision ID: 0006
Revises: 0005
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

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


def downgrade() -> None:
    op.execute("DELETE FROM intents WHERE action = 'notice'")
    _action_check(_BEFORE)
