"""Is the ledger usable right now? One trivial query, for ``/healthz``."""

from __future__ import annotations

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from hopsd.ledger.errors import LedgerError


def ping(engine: Engine) -> str | None:
    """None when a ``SELECT 1`` succeeds, else the first line of the error."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except (LedgerError, SQLAlchemyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return first if isinstance(exc, LedgerError) else f"ledger unreachable: {first}"
    return None
