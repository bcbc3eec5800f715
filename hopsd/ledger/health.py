"""Is the ledger usable right now? One trivial query, for ``/healthz``.

The probe has an engine of its own (:func:`probe_engine`): the daemon's engine
takes SQLite's write lock at every BEGIN, and a health check must neither wait
for a tick's write nor make a tick wait for it.
"""

from __future__ import annotations

from sqlalchemy import Engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from hopsd.ledger.engine import make_engine
from hopsd.ledger.errors import LedgerError

PROBE_TIMEOUT_MS = 2000


def probe_engine(url: str | URL) -> Engine:
    """A read-only-in-practice engine for :func:`ping` (deferred BEGIN, short lock wait)."""
    return make_engine(url, timeout_ms=PROBE_TIMEOUT_MS, sqlite_begin="deferred")


def ping(engine: Engine) -> str | None:
    """None when a ``SELECT 1`` succeeds, else the first line of the error."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except (LedgerError, SQLAlchemyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return first if isinstance(exc, LedgerError) else f"ledger unreachable: {first}"
    return None
