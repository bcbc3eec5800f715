"""A locked, full or unreachable database gives a typed error and loses nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.engine import make_url

from hopsd.ledger.engine import classify_dbapi_error, make_engine, make_sessionmaker
from hopsd.ledger.errors import (
    LedgerFullError,
    LedgerLockedError,
    LedgerUnavailableError,
)
from hopsd.ledger.jobs import JobSpec, add_job, require_job
from hopsd.ledger.models import JobRow


def _seed(engine: Engine, make_spec: Callable[..., JobSpec]) -> None:
    with make_sessionmaker(engine).begin() as s:
        add_job(s, make_spec("safe"), now=1.0)


def _job_ids(engine: Engine) -> list[str]:
    with make_sessionmaker(engine)() as s:
        return list(s.scalars(select(JobRow.id).order_by(JobRow.id)))


def test_locked_database_gives_locked_error_and_keeps_data(
    migrated_url: str, engine: Engine, make_spec: Callable[..., JobSpec]
) -> None:
    _seed(engine, make_spec)
    impatient = make_engine(migrated_url, timeout_ms=150)
    blocker = create_engine(make_url(migrated_url), isolation_level="AUTOCOMMIT")
    try:
        with blocker.connect() as lock_conn:
            if engine.dialect.name == "sqlite":
                lock_conn.exec_driver_sql("BEGIN EXCLUSIVE")
            else:
                lock_conn.exec_driver_sql("BEGIN")
                lock_conn.exec_driver_sql("LOCK TABLE jobs IN EXCLUSIVE MODE")
            Sessions = make_sessionmaker(impatient)
            with pytest.raises(LedgerLockedError) as err, Sessions.begin() as s:
                require_job(s, "safe").wait_time = 99.0
                add_job(s, make_spec("lost"), now=2.0)
            assert "lock" in str(err.value).lower()
            # Readers are not blocked by the writer's lock (WAL / MVCC).
            with Sessions() as s:
                assert s.scalar(select(func.count()).select_from(JobRow)) == 1
            lock_conn.exec_driver_sql("ROLLBACK")
        assert _job_ids(engine) == ["safe"]
        with make_sessionmaker(engine)() as s:
            assert require_job(s, "safe").wait_time == 0.0
        # Once the lock is gone the same engine works again.
        with make_sessionmaker(impatient).begin() as s:
            add_job(s, make_spec("later"), now=3.0)
        assert _job_ids(engine) == ["later", "safe"]
    finally:
        impatient.dispose()
        blocker.dispose()


def test_full_sqlite_database_gives_full_error_and_keeps_data(
    tmp_path: Path, make_spec: Callable[..., JobSpec]
) -> None:
    from hopsd.ledger.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'small.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        _seed(engine, make_spec)
        with engine.connect() as conn:
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
            conn.exec_driver_sql(f"PRAGMA max_page_count = {int(pages or 1) + 1}")
            session = make_sessionmaker(engine)(bind=conn)
            with pytest.raises(LedgerFullError, match="full"), session.begin():
                for i in range(200):
                    add_job(session, make_spec(f"big{i}", script_path="x" * 4000), now=2.0)
            session.close()
        assert _job_ids(engine) == ["safe"]
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    finally:
        engine.dispose()


def test_unreachable_sqlite_path_is_unavailable(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'ledger.db'}")
    with pytest.raises(LedgerUnavailableError, match="ledger"), engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def test_unreachable_postgres_is_unavailable() -> None:
    engine = make_engine("postgresql://nobody:secret@127.0.0.1:1/none")
    try:
        with pytest.raises(LedgerUnavailableError) as err, engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        assert "secret" not in str(err.value)  # the password is never echoed
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"),
            LedgerLockedError,
        ),
        (psycopg.errors.DeadlockDetected("deadlock"), LedgerLockedError),
        (psycopg.errors.DiskFull("could not extend file"), LedgerFullError),
        (psycopg.errors.AdminShutdown("terminating connection"), LedgerUnavailableError),
        (psycopg.errors.UniqueViolation("duplicate key"), None),
        (sqlite3.OperationalError("database is locked"), LedgerLockedError),
        (sqlite3.OperationalError("database or disk is full"), LedgerFullError),
        (sqlite3.OperationalError("unable to open database file"), LedgerUnavailableError),
        (sqlite3.IntegrityError("UNIQUE constraint failed"), None),
        (sqlite3.OperationalError("no such column: fullname_locked"), None),
        (ValueError("not a database error"), None),
    ],
)
def test_driver_errors_are_classified(exc: BaseException, expected: type | None) -> None:
    assert classify_dbapi_error(exc) is expected
