"""Engine configuration: URL spellings, SQLite pragmas, PostgreSQL lock timeout."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from hopsd.ledger.engine import make_engine, normalise_url, redact


def test_url_spellings_are_normalised(tmp_path: Path) -> None:
    bare = normalise_url(str(tmp_path / "ledger.db"))
    assert bare.drivername == "sqlite" and bare.database == str(tmp_path / "ledger.db")
    pg = normalise_url("postgresql://hops:pw@db.example/hops")
    assert pg.drivername == "postgresql+psycopg"
    assert "pw" not in redact("postgresql://hops:pw@db.example/hops")


def test_connections_are_configured_for_concurrent_use(engine: Engine) -> None:
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 3000
        else:
            assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "3s"


def test_postgres_url_options_are_kept_beside_the_lock_timeout() -> None:
    engine = make_engine("postgresql://u@h/db?options=-csearch_path%3Dledger", timeout_ms=250)
    try:
        assert engine.url.query["options"] == "-csearch_path=ledger"
    finally:
        engine.dispose()
