"""Migrations: empty -> head, down one step and up again, and the schema check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.errors import SchemaNewerError, SchemaOutdatedError
from hopsd.ledger.jobs import JobSpec, add_job, require_job
from hopsd.ledger.migrate import (
    SQL_DIR,
    check_schema,
    current_revision,
    downgrade,
    head_revision,
    upgrade,
)
from hopsd.ledger.models import Base

LEDGER_TABLES = {t.name for t in Base.metadata.sorted_tables}


def test_migrations_ship_inside_the_package() -> None:
    assert Path(migrate.__file__).parent / "migrations" == SQL_DIR
    assert (SQL_DIR / "env.py").is_file()
    assert head_revision() == "0012"


def test_empty_to_head_creates_every_table_matching_the_models(empty_url: str) -> None:
    assert current_revision(empty_url) is None
    upgrade(empty_url)
    assert current_revision(empty_url) == head_revision()
    engine = make_engine(empty_url)
    try:
        assert set(inspect(engine).get_table_names()) >= LEDGER_TABLES
        check_schema(engine)  # does not raise at head
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diffs = compare_metadata(ctx, Base.metadata)
        assert diffs == [], f"models and migrations disagree: {diffs}"
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("revision", "column", "value", "restored"),
    [
        ("0003", "input_problem", "progress file ignored: nested too deep", ""),
        ("0004", "ftf_rho", 1.25, None),
        ("0005", "plan_reason", "waiting: 3 GPUs free, needs at least 4", ""),
        ("0009", "size_doubt", "size claim not believed: ran about 320 s", ""),
        ("0010", "adopted_tag", 'hops1:{"d":[1],"n":100,"t":["k80"]}', ""),
        ("0010", "name", "train.sh", ""),
    ],
)
def test_a_column_comes_and_goes_with_its_revision(
    empty_url: str,
    make_spec: Callable[..., JobSpec],
    revision: str,
    column: str,
    value: object,
    restored: object,
) -> None:
    upgrade(empty_url)
    engine = make_engine(empty_url)
    with make_sessionmaker(engine).begin() as s:
        add_job(s, make_spec("kept"), now=5.0)
        setattr(require_job(s, "kept"), column, value)
    engine.dispose()
    below = f"{int(revision) - 1:04d}"
    downgrade(empty_url, below)
    assert current_revision(empty_url) == below
    engine = make_engine(empty_url)
    assert column not in {c["name"] for c in inspect(engine).get_columns("jobs")}
    engine.dispose()
    upgrade(empty_url)
    engine = make_engine(empty_url)
    with make_sessionmaker(engine).begin() as s:
        assert getattr(require_job(s, "kept"), column) == restored  # back, with its default
    engine.dispose()


def test_the_runs_table_comes_and_goes_with_0011(empty_url: str) -> None:
    upgrade(empty_url)
    downgrade(empty_url, "0010")
    engine = make_engine(empty_url)
    assert "runs" not in inspect(engine).get_table_names()
    engine.dispose()
    upgrade(empty_url)
    engine = make_engine(empty_url)
    assert "runs" in inspect(engine).get_table_names()
    engine.dispose()


def test_down_to_0001_and_up_again_keeps_rows(
    empty_url: str, make_spec: Callable[..., JobSpec]
) -> None:
    upgrade(empty_url)
    engine = make_engine(empty_url)
    Sessions = make_sessionmaker(engine)
    with Sessions.begin() as s:
        add_job(s, make_spec("kept"), now=5.0)
        require_job(s, "kept").latency_ratio = 0.5
    engine.dispose()

    downgrade(empty_url, "0001")
    assert current_revision(empty_url) == "0001"
    engine = make_engine(empty_url)
    columns = {c["name"] for c in inspect(engine).get_columns("jobs")}
    assert "latency_ratio" not in columns
    with pytest.raises(SchemaOutdatedError, match="hopsd db upgrade"):
        check_schema(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT id FROM jobs")).scalars().all() == ["kept"]
    engine.dispose()

    upgrade(empty_url)
    assert current_revision(empty_url) == head_revision()
    engine = make_engine(empty_url)
    check_schema(engine)
    with make_sessionmaker(engine).begin() as s:
        job = require_job(s, "kept")
        assert job.latency_ratio is None  # the column came back empty
        assert job.user == "alice"
    engine.dispose()


def test_downgrade_to_base_removes_every_table(empty_url: str) -> None:
    upgrade(empty_url)
    downgrade(empty_url, "base")
    assert current_revision(empty_url) is None
    engine = make_engine(empty_url)
    try:
        assert not LEDGER_TABLES & set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_check_schema_on_empty_database_names_the_command(empty_url: str) -> None:
    engine = make_engine(empty_url)
    try:
        with pytest.raises(SchemaOutdatedError) as err:
            check_schema(engine)
        assert "empty" in str(err.value)
        assert "hopsd db upgrade" in str(err.value)
    finally:
        engine.dispose()


def test_check_schema_on_newer_database_says_upgrade_hops(empty_url: str) -> None:
    upgrade(empty_url)
    engine = make_engine(empty_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(SchemaNewerError, match="9999"):
            check_schema(engine)
    finally:
        engine.dispose()


def test_upgrade_creates_the_directory_of_a_new_sqlite_ledger(tmp_path: Path) -> None:
    from hopsd.ledger.migrate import current_revision, head_revision, upgrade

    target = tmp_path / "var" / "lib" / "hops" / "ledger.sqlite"
    upgrade(f"sqlite:///{target}")
    assert target.exists() and current_revision(f"sqlite:///{target}") == head_revision()
