"""The upgrade and downgrade of a migration that only adds columns to one table.

Several revisions only add columns (to ``jobs``, to ``daemon_lease``): their
upgrade adds each column, their downgrade drops them again newest first, by a
native DROP COLUMN (SQLite >= 3.35). A batch table copy, the usual SQLite way,
would fire the ON DELETE CASCADE of the tables that reference ``jobs``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

Columns = Callable[[], Sequence[sa.Column[Any]]]


def text_columns(*names: str) -> list[sa.Column[Any]]:
    """Required free-text columns, empty on the rows already there."""
    return [sa.Column(name, sa.Text(), nullable=False, server_default="") for name in names]


def added_columns(table: str, columns: Columns) -> tuple[Callable[[], None], Callable[[], None]]:
    """The revision's ``upgrade`` and ``downgrade``.

    ``columns`` builds the columns anew at each call: a column joins the table
    Alembic builds for it and cannot join a second one.
    """

    def upgrade() -> None:
        for column in columns():
            op.add_column(table, column)

    def downgrade() -> None:
        for column in reversed(columns()):
            op.drop_column(table, column.name)

    return upgrade, downgrade
