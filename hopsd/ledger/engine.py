"""Engine and session factory for the ledger, on SQLite (default) or PostgreSQL.

SQLite is opened in WAL mode so CLI readers never block the daemon's writes (and
vice versa), with a busy timeout instead of failing at the first contention, and
with foreign keys enforced. PostgreSQL gets a lock timeout for the same reason.
Driver errors an operator can act on are turned into the typed errors of
:mod:`hopsd.ledger.errors` right where SQLAlchemy raises them, so every caller
sees ``LedgerLockedError`` / ``LedgerFullError`` / ``LedgerUnavailableError``
rather than a driver-specific exception.
"""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.errors import (
    LedgerError,
    LedgerFullError,
    LedgerLockedError,
    LedgerUnavailableError,
)

SqliteBegin = Literal["deferred", "immediate"]

DEFAULT_TIMEOUT_MS = 5000

# PostgreSQL SQLSTATEs (see Appendix A of its manual) mapped to ledger errors.
_PG_LOCKED = {"55P03", "40P01", "40001"}  # lock_not_available, deadlock, serialization
_PG_FULL = {"53100", "53200", "53300"}  # disk_full, out_of_memory, too_many_connections
_PG_UNAVAILABLE_CLASSES = ("08", "57P")  # connection exceptions, operator intervention


def normalise_url(url: str | URL) -> URL:
    """Accept the URL spellings an operator is likely to write in hops.conf.

    A bare path means an SQLite file; ``postgresql://`` means psycopg 3 (the
    only PostgreSQL driver hops depends on).
    """
    text = str(url) if isinstance(url, URL) else url
    if "://" not in text:
        return make_url(f"sqlite:///{Path(text).expanduser().resolve()}")
    parsed = make_url(text)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def redact(url: str | URL) -> str:
    """The URL without its password, safe to print in error messages."""
    return normalise_url(url).render_as_string(hide_password=True)


def make_engine(
    url: str | URL,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    sqlite_begin: SqliteBegin = "deferred",
    echo: bool = False,
    read_only: bool = False,
) -> Engine:
    """Create the engine for a ledger URL.

    ``timeout_ms`` bounds how long a statement waits for another connection's
    lock before :class:`LedgerLockedError` is raised (SQLite busy_timeout,
    PostgreSQL lock_timeout). ``sqlite_begin="immediate"`` takes SQLite's write
    lock at the start of each transaction: the daemon uses it so a read-then-write
    unit of work waits for the lock instead of failing half-way.

    ``read_only`` is the CLI's connection: an SQLite file is opened with
    ``mode=ro`` and no pragma that writes (so a user who may only read the file
    can use it, with hopsd running or not); a PostgreSQL session starts
    read-only, on top of whatever the role itself may do.
    """
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        if read_only:
            parsed = _read_only_sqlite(parsed)
        engine = create_engine(parsed, echo=echo)
        _configure_sqlite(engine, timeout_ms, sqlite_begin, read_only)
    elif parsed.get_backend_name() == "postgresql":
        # Keep any libpq options given in the URL (e.g. a search_path) and add ours;
        # connect_args take precedence over the URL's query, which stays as given.
        given = parsed.query.get("options", "")
        given = " ".join(given) if isinstance(given, tuple) else given
        options = f"{given} -c lock_timeout={int(timeout_ms)}".strip()
        if read_only:
            options += " -c default_transaction_read_only=on"
        engine = create_engine(
            parsed,
            echo=echo,
            pool_pre_ping=True,
            connect_args={"options": options},
        )
    else:
        raise LedgerUnavailableError(
            f"unsupported ledger database {parsed.get_backend_name()!r}: "
            "use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        )
    event.listen(engine, "handle_error", _translate_error)
    return engine


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """The one session factory next to the engine; callers own ``with S.begin():``.

    ``expire_on_commit=False`` so rows read in a unit of work can still be
    rendered (by the CLI) after it commits.
    """
    return sessionmaker(bind=engine, expire_on_commit=False)


def _read_only_sqlite(url: URL) -> URL:
    """The same file as an SQLite URI opened ``mode=ro`` (nothing can be written).

    A reader of a WAL-mode file needs its ``-shm`` index: while hopsd runs the
    file exists and is read as it is; when hopsd is stopped it is gone, and a
    user who may not write the directory could not create it. Then nobody
    writes the file, and it is opened ``immutable`` (no locks, no index).
    """
    path = Path(str(url.database)).resolve()
    query = {"mode": "ro", "uri": "true"}
    no_writer = not Path(f"{path}-wal").exists()
    if no_writer and path.exists() and not os.access(path.parent, os.W_OK):
        query["immutable"] = "1"
    return url.set(database=f"file:{path}").update_query_dict(query)


def _configure_sqlite(
    engine: Engine, timeout_ms: int, begin: SqliteBegin, read_only: bool = False
) -> None:
    """WAL, busy timeout and foreign keys per connection; explicit BEGIN per transaction.

    pysqlite's own implicit transaction handling is switched off (isolation_level
    None) so SQLAlchemy's ``begin`` emits the BEGIN itself: this is what makes
    SAVEPOINTs and ``BEGIN IMMEDIATE`` work as documented. A read-only
    connection sets no journal mode (a write): the file keeps the WAL mode the
    daemon gave it.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        _ensure_power(dbapi_conn)
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
            if not read_only:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    statement = "BEGIN IMMEDIATE" if begin == "immediate" else "BEGIN"

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(statement)


def _ensure_power(dbapi_conn: Any) -> None:
    """Give SQLite ``power()`` when it was built without its math functions.

    Decayed usage is summed in SQL (:mod:`hopsd.ledger.usage`); PostgreSQL and
    most SQLite builds have the function already.
    """
    try:
        dbapi_conn.execute("SELECT power(2.0, 1.0)").close()
    except sqlite3.OperationalError:
        dbapi_conn.create_function("power", 2, math.pow, deterministic=True)


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


_HINTS: dict[type[LedgerError], str] = {
    LedgerLockedError: "another connection holds a lock; retry, or find the long transaction",
    LedgerFullError: "the database or its disk is full; the failed transaction was not applied",
    LedgerUnavailableError: "check the ledger URL, the server and file permissions",
}


def _translate_error(context: ExceptionContext) -> LedgerError | None:
    """``handle_error`` hook: replace actionable driver errors by ledger errors."""
    if context.is_pre_ping:
        return None  # the pool's liveness probe must see the raw disconnect
    original = context.original_exception
    kind = classify_dbapi_error(original)
    if kind is None:
        return None
    if context.is_disconnect and kind is not LedgerFullError:
        kind = LedgerUnavailableError
    where = redact(context.engine.url) if context.engine is not None else "ledger"
    return kind(f"ledger {where}: {original} ({_HINTS[kind]})")
