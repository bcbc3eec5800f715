"""Which ledger error a raw database-driver exception stands for, without SQLAlchemy.

The engine's error hook and the CLI's plain DB-API reader (:mod:`hopsd.ledger.reader`)
both name a locked file, a full disk or an unreachable server the same way,
from the driver's own codes: SQLite's result codes, PostgreSQL's SQLSTATEs.
"""

from __future__ import annotations

import sqlite3

from hopsd.ledger.errors import (
    LedgerError,
    LedgerFullError,
    LedgerLockedError,
    LedgerUnavailableError,
)

# PostgreSQL SQLSTATEs (see Appendix A of its manual) mapped to ledger errors.
_PG_LOCKED = {"55P03", "40P01", "40001"}  # lock_not_available, deadlock, serialization
_PG_FULL = {"53100", "53200", "53300"}  # disk_full, out_of_memory, too_many_connections
_PG_UNAVAILABLE_CLASSES = ("08", "57P")  # connection exceptions, operator intervention


def classify_dbapi_error(exc: BaseException) -> type[LedgerError] | None:
    """Which ledger error a raw driver exception stands for, or None if it is a bug.

    Kept separate from the event hook so it can be checked on constructed
    exceptions of both drivers.
    """
    if isinstance(exc, sqlite3.Error):
        return _classify_sqlite(exc)
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str):
        return _classify_sqlstate(sqlstate)
    if type(exc).__module__.startswith("psycopg") and type(exc).__name__ == "OperationalError":
        return LedgerUnavailableError
    return None


# SQLite's own messages for the same conditions, for exceptions built without a
# result code (sqlite_errorcode is only set on errors raised by the library).
_SQLITE_PHRASES: tuple[tuple[str, type[LedgerError]], ...] = (
    ("database is locked", LedgerLockedError),
    ("database table is locked", LedgerLockedError),
    ("database or disk is full", LedgerFullError),
    ("unable to open database file", LedgerUnavailableError),
    ("attempt to write a readonly database", LedgerUnavailableError),
    ("disk i/o error", LedgerUnavailableError),
)

_SQLITE_CODES: dict[int, type[LedgerError]] = {
    sqlite3.SQLITE_BUSY: LedgerLockedError,
    sqlite3.SQLITE_LOCKED: LedgerLockedError,
    sqlite3.SQLITE_FULL: LedgerFullError,
    sqlite3.SQLITE_CANTOPEN: LedgerUnavailableError,
    sqlite3.SQLITE_READONLY: LedgerUnavailableError,
    sqlite3.SQLITE_IOERR: LedgerUnavailableError,
}


def _classify_sqlite(exc: sqlite3.Error) -> type[LedgerError] | None:
    extended = getattr(exc, "sqlite_errorcode", None)
    if isinstance(extended, int):
        return _SQLITE_CODES.get(extended & 0xFF)  # primary result code
    message = str(exc).lower()
    for phrase, kind in _SQLITE_PHRASES:
        if phrase in message:
            return kind
    return None


def _classify_sqlstate(sqlstate: str) -> type[LedgerError] | None:
    if sqlstate in _PG_LOCKED:
        return LedgerLockedError
    if sqlstate in _PG_FULL:
        return LedgerFullError
    if sqlstate.startswith(_PG_UNAVAILABLE_CLASSES):
        return LedgerUnavailableError
    return None


HINTS: dict[type[LedgerError], str] = {
    LedgerLockedError: "another connection holds a lock; retry, or find the long transaction",
    LedgerFullError: "the database or its disk is full; the failed transaction was not applied",
    LedgerUnavailableError: "check the ledger URL, the server and file permissions",
}
