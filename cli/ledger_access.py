"""Read-only access to the ledger for the CLI: it never writes what the daemon owns."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.orm import Session

from hops_cli.common import fail
from hopsd.config import HopsConfig
from hopsd.ledger.engine import make_engine, make_sessionmaker, normalise_url, redact
from hopsd.ledger.errors import LedgerError
from hopsd.ledger.migrate import check_schema


@contextmanager
def reading(config: HopsConfig) -> Iterator[Session]:
    """A session that only reads, rolled back at the end whatever happened.

    A missing SQLite file is reported instead of silently creating an empty
    ledger, which would make ``hops status`` lie.
    """
    url = normalise_url(config.ledger_url)
    missing = url.get_backend_name() == "sqlite" and url.database
    if missing and not Path(str(url.database)).exists():
        fail(
            f"no ledger at {url.database}: start hopsd, or create it with "
            "'hops db upgrade' (set [ledger] url in hops.conf)"
        )
    try:
        engine = make_engine(url, timeout_ms=2000)
        check_schema(engine)
    except LedgerError as exc:
        fail(f"ledger {redact(url)}: {exc}")
    sessions = make_sessionmaker(engine)
    session = sessions()
    try:
        yield session
    except LedgerError as exc:
        fail(f"ledger {redact(url)}: {exc}")
    finally:
        session.rollback()
        session.close()
        engine.dispose()
