"""Read-only access to the ledger for the CLI: it never writes what the daemon owns.

SQLite is opened with ``mode=ro`` (no journal-mode pragma, no write of any
kind), so a user who may only read the file can run every read command while
hopsd runs or not. PostgreSQL is read through ``[ledger] read_url``, a role
that may only SELECT (``hops db grant-reader``); without it the daemon's
``url`` is used, with a warning, as a credential that can write should not
sit in a file every user reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from hops_cli.common import fail
from hopsd.config import HopsConfig
from hopsd.ledger.errors import LedgerError

if TYPE_CHECKING:
    from hopsd.ledger.unit import Unit


def read_url(config: HopsConfig) -> str:
    """The URL the CLI reads through: ``read_url``, else ``url`` (warned about on a server)."""
    from hopsd.ledger.engine import normalise_url

    if config.ledger_read_url:
        return config.ledger_read_url
    if normalise_url(config.ledger_url).get_backend_name() != "sqlite":
        typer.echo(
            "hops: warning: [ledger] read_url is not set; reading through the daemon's url. "
            "Give users a read-only role instead (hops db grant-reader ROLE).",
            err=True,
        )
    return config.ledger_url


@contextmanager
def reading(config: HopsConfig) -> Iterator[Unit]:
    """A read-only unit of work, rolled back at the end whatever happened.

    A missing SQLite file is reported instead of silently creating an empty
    ledger, which would make ``hops status`` lie. SQLAlchemy is imported here,
    not when the command starts, so commands that do not read pay nothing.
    """
    from hopsd.ledger.engine import normalise_url, redact
    from hopsd.ledger.unit import Ledger

    url = normalise_url(read_url(config))
    missing = url.get_backend_name() == "sqlite" and url.database
    if missing and not Path(str(url.database)).exists():
        fail(
            f"no ledger at {url.database}: start hopsd, or create it with "
            "'hops db upgrade' (set [ledger] url in hops.conf)"
        )
    try:
        ledger = Ledger.open(url, timeout_ms=2000, read_only=True)
        ledger.check_schema()
    except LedgerError as exc:
        fail(f"ledger {redact(url)}: {exc}")
    try:
        with ledger.reading() as unit:
            yield unit
    except LedgerError as exc:
        fail(f"ledger {redact(url)}: {exc}")
    finally:
        ledger.dispose()
