"""The ledger's schema revision read without Alembic, for readers that only check it.

Importing Alembic costs the ``hops`` command most of a second; to learn that
the database is at the newest revision, reading ``alembic_version`` and the
``revision``/``down_revision`` lines of the migration scripts is enough.
Anything but an exact match goes to :func:`hopsd.ledger.migrate.check_schema`,
which explains the mismatch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI's plain reader checks the head without SQLAlchemy
    from sqlalchemy import Engine

_HERE = Path(__file__).resolve().parent
#: Where the migration scripts live: inside the package, or at the top of a checkout.
VERSION_DIRS = (_HERE / "migrations" / "versions", _HERE.parents[1] / "sql" / "versions")
_LINE = re.compile(r'^(down_revision|revision)\s*(?::[^=]*)?=\s*(?:"([^"]*)"|None)', re.M)


def script_head(directories: tuple[Path, ...] = VERSION_DIRS) -> str | None:
    """The one revision no script revises, or None when that is not clear-cut."""
    for directory in directories:
        revisions: set[str] = set()
        revised: set[str] = set()
        for script in sorted(directory.glob("*.py")):
            for kind, value in _LINE.findall(script.read_text(encoding="utf-8")):
                if kind == "revision" and value:
                    revisions.add(value)
                elif kind == "down_revision" and value:
                    revised.add(value)
        heads = revisions - revised
        if revisions:
            return heads.pop() if len(heads) == 1 else None
    return None


def at_head(engine: Engine) -> bool:
    """True when the database's recorded revision is the scripts' head (False: look closer)."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            rows = conn.execute(text(VERSION_QUERY)).all()
    except SQLAlchemyError:
        return False
    return is_head([r[0] for r in rows])


#: The revision(s) Alembic recorded in the database.
VERSION_QUERY = "SELECT version_num FROM alembic_version"


def is_head(recorded: list[str]) -> bool:
    """True when the revisions read by :data:`VERSION_QUERY` are exactly the scripts' head."""
    head = script_head()
    return head is not None and recorded == [head]
