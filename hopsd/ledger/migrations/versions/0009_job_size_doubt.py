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

from hopsd.ledger.migrations.added_columns import added_columns, text_columns

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


upgrade, downgrade = added_columns("jobs", lambda: text_columns("size_doubt"))
