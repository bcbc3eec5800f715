"""Fixtures that run every ledger test on SQLite and on PostgreSQL.

PostgreSQL tests create one uniquely named database ``hops_test_<random>`` through
the ``postgres`` maintenance database (dropped at the end of the run) and give
every test that needs an empty ledger its own schema in it.
The server URL defaults to the CI one and can be overridden with
``HOPS_TEST_PG_URL``; when the server cannot be reached those tests are skipped
with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.models import Base, JobRow, LrRule

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def pg_base_url() -> str:
    return os.environ.get("HOPS_TEST_PG_URL", DEFAULT_PG_URL)


@dataclass
class Backend:
    """Hands out fresh, empty databases of one kind and cleans them up."""

    name: str
    tmp_dir: Path
    admin: Engine | None = None
    database: str | None = None

    def fresh_url(self) -> str:
        """SQLite: a new file. PostgreSQL: a new schema (via search_path) in this run's
        database, so the whole run creates and drops one database only."""
        tag = uuid.uuid4().hex[:10]
        if self.name == "sqlite":
            return f"sqlite:///{self.tmp_dir / f'ledger_{tag}.db'}"
        assert self.admin is not None and self.database is not None
        url = make_url(pg_base_url()).set(database=self.database)
        schema = f"s_{tag}"
        owner = create_engine(_psycopg(url), isolation_level="AUTOCOMMIT")
        with owner.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        owner.dispose()
        url = url.update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    def open(self) -> None:
        assert self.admin is not None
        self.database = f"hops_test_{uuid.uuid4().hex[:10]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.database}"'))

    def close(self) -> None:
        if self.admin is None:
            return
        if self.database is not None:
            with self.admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))
        self.admin.dispose()


def _psycopg(url: URL) -> URL:
    return url.set(drivername="postgresql+psycopg") if url.drivername == "postgresql" else url


def _pg_admin() -> Engine:
    url = make_url(pg_base_url()).set(database="postgres")
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    return create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})


@pytest.fixture(
    scope="session",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    tmp = tmp_path_factory.mktemp(f"ledger_{request.param}")
    if request.param == "sqlite":
        yield Backend("sqlite", tmp)
        return
    admin = _pg_admin()
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any failure to reach the server means "skip", with why
        admin.dispose()
        pytest.skip(f"PostgreSQL unreachable at {pg_base_url()}: {exc}")
    found = Backend("postgresql", tmp, admin=admin)
    found.open()
    yield found
    found.close()


@pytest.fixture
def empty_url(backend: Backend) -> str:
    """A brand-new database with no schema (for migration tests)."""
    return backend.fresh_url()


@pytest.fixture(scope="session")
def migrated_url(backend: Backend) -> str:
    """One database per backend migrated to head, shared and emptied between tests."""
    url = backend.fresh_url()
    upgrade(url)
    return url


@pytest.fixture
def engine(migrated_url: str) -> Iterator[Engine]:
    eng = make_engine(migrated_url, timeout_ms=3000)
    yield eng
    _empty_all_tables(eng)
    eng.dispose()


@pytest.fixture
def Sessions(engine: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(engine)


def _empty_all_tables(eng: Engine) -> None:
    tables = list(reversed(Base.metadata.sorted_tables))
    with eng.begin() as conn:
        if eng.dialect.name == "postgresql":
            names = ", ".join(f'"{t.name}"' for t in tables)
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            for table in tables:
                conn.execute(table.delete())


def job_spec(job_id: str = "j1", **overrides: object) -> JobSpec:
    """A valid job spec; keyword arguments replace single fields."""
    fields: dict[str, object] = {
        "id": job_id,
        "user": "alice",
        "account": "vision",
        "demands": (1, 2, 4),
        "total_samples": 1.0e6,
        "submit_time": 1000.0,
        "batch_size": 64,
        "slurm_job_id": None,
        "script_path": "/home/alice/train.sh",
        "model_name": "resnet50",
        "params": 25.6e6,
        "lr": 0.1,
        "lr_rule": LrRule.LINEAR,
    }
    fields.update(overrides)
    return JobSpec(**fields)  # type: ignore[arg-type]


@pytest.fixture
def make_spec() -> Callable[..., JobSpec]:
    return job_spec


AddJobs = Callable[..., list[JobRow]]


@pytest.fixture
def add_jobs() -> AddJobs:
    """Adopts a default job (:func:`job_spec`) of each id in the session, and flushes them
    so that rows referencing them may follow in the same transaction."""

    def add(session: Session, *job_ids: str, now: float = 1.0) -> list[JobRow]:
        rows = [add_job(session, job_spec(job_id), now=now) for job_id in job_ids]
        session.flush()
        return rows

    return add
