"""Jobs keep the reason the last scheduling step gave them (why they wait, start, move).

The core's step explains every job it planned ("waiting: 3 GPUs free, needs at
least 4", "moved to a100 a100n1:2"); hopsd records it so ``hops status`` can
show users why their job is where it is.

Revision ID: 0005
Revises: 0004
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from hopsd.ledger.migrations.added_columns import added_columns, text_columns

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


upgrade, downgrade = added_columns("jobs", lambda: text_columns("plan_reason"))
