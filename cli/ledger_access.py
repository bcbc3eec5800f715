"""Read-only access to the ledger for the CLI: it never writes what the daemon owns.

SQLite is opened with ``mode=ro`` (no journal-mode pragma, no write of any
kind), so a user who may only read the file can run every read command while
hopsd runs or not. PostgreSQL is read through ``[ledger] read_url``, a role
that may only SELECT (``hops db grant-reader``); without it the daemon's
``url`` is used, with a warning, as a credential that can write should not
sit in a file every user reads.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hops_cli.common import fail, warn
from hopsd.config import HopsConfig
from hopsd.ledger.errors import LedgerError

if TYPE_CHECKING:
    from hopsd.ledger.reader import Reader
    from hopsd.ledger.unit import Unit


def read_url(config: HopsConfig) -> str:
    """The URL the CLI reads through: ``read_url``, else ``url`` (warned about on a server).

    An SQLite ledger the caller may not read (hopsd keeps it private) is read
    through the copy hopsd makes for them (:func:`private_copy`).
    """
    from hopsd.ledger.reader import parse_target

    if config.ledger_read_url:
        return config.ledger_read_url
    if parse_target(config.ledger_url).backend != "sqlite":
        warn(
            "warning: [ledger] read_url is not set; reading through the daemon's url. "
            "Give users a read-only role instead (hops db grant-reader ROLE)."
        )
    elif (private := private_ledger(config)) is not None:
        return "sqlite:///" + str(private_copy(private))
    return config.ledger_url


def private_ledger(config: HopsConfig) -> Path | None:
    """The SQLite ledger hopsd keeps from the caller (read through hopsd), else None."""
    from hopsd.ledger.reader import parse_target

    if config.ledger_read_url:
        return None
    target = parse_target(config.ledger_url)
    if target.backend != "sqlite":
        return None
    path = Path(target.path)
    return path if path.exists() and not os.access(path, os.R_OK) else None


_COPIES: dict[Path, Path] = {}


def private_copy(ledger: Path) -> Path:
    """This process's copy of a private ledger, asked of hopsd once and removed at exit."""
    from hopsd.ledger.private_copy import fetch_copy

    if ledger not in _COPIES:
        try:
            copy = fetch_copy(ledger, ledger.stat().st_uid)
        except LedgerError as exc:
            fail(str(exc))
        _COPIES[ledger] = copy
        atexit.register(_remove, copy)
    return _COPIES[ledger]


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


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
    _require_file(str(url.database or "") if url.get_backend_name() == "sqlite" else "")
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


def _require_file(path: str) -> None:
    """A missing SQLite file is reported, not silently created (``hops status`` would lie)."""
    if path and not Path(path).exists():
        fail(
            f"no ledger at {path}: start hopsd, or create it with "
            "'hops db upgrade' (set [ledger] url in hops.conf)"
        )


@contextmanager
def quick_reading(config: HopsConfig) -> Iterator[Reader]:
    """A read-only transaction through the database driver alone (no SQLAlchemy import).

    What the quick commands read (see :mod:`hopsd.ledger.reader`); a ledger not at
    this hops's schema revision is explained by the full check of :func:`reading`.
    """
    from hopsd.ledger.reader import parse_target, redacted
    from hopsd.ledger.reader import reading as driver_reading

    url = read_url(config)
    target = parse_target(url)
    _require_file(target.path if target.backend == "sqlite" else "")
    try:
        with driver_reading(url, timeout_ms=2000) as reader:
            if not reader.at_head():
                with reading(config):  # raises the schema's own explanation
                    pass
            yield reader
    except LedgerError as exc:
        fail(f"ledger {redacted(url)}: {exc}")
