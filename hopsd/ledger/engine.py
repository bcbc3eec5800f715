"""Engine and session factory for the ledger, on SQLite (default) or PostgreSQL.

SQLite is opened in WAL mode so readers never block the daemon's writes (and
vice versa), with a busy timeout instead of failing at the first contention, and
with foreign keys enforced; PostgreSQL gets a lock timeout for the same reason.
Users do not open hopsd's SQLite files at all (they could lock them): they read
copies (:mod:`hopsd.ledger.private_copy`).
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

from hopsd.ledger.dberrors import HINTS, classify_dbapi_error
from hopsd.ledger.errors import (
    LedgerError,
    LedgerFullError,
    LedgerUnavailableError,
    require_psycopg,
)

__all__ = ["classify_dbapi_error", "make_engine", "make_sessionmaker", "normalise_url", "redact"]

SqliteBegin = Literal["deferred", "immediate"]

DEFAULT_TIMEOUT_MS = 5000


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
        require_psycopg()
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
    return kind(f"ledger {where}: {original} ({HINTS[kind]})")
