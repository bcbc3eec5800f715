"""Jobs remember the latest input of theirs hopsd refused, and why.

hopsd reads data users control (tags, probe reports, progress files, working
directories); what it refuses, or any failure it contains to one job, is kept
on the job's row so ``hops status`` can show the owner what went wrong.

Revision ID: 0003
Revises: 0002
Created: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from hopsd.ledger.migrations.added_columns import added_columns, text_columns

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


upgrade, downgrade = added_columns("jobs", lambda: text_columns("input_problem"))
