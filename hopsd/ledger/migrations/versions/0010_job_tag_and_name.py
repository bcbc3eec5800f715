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

from hopsd.ledger.migrations.added_columns import added_columns, text_columns

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


upgrade, downgrade = added_columns("jobs", lambda: text_columns("adopted_tag", "name"))
