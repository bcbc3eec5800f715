"""Suite-wide pytest configuration.

Live tests need the Slurm test cluster (``docker/cluster.sh up`` exports
``SLURM_CONF``) or PostgreSQL on 127.0.0.1:5432; they skip with the reason when
run outside ``scripts/test.sh``, which brings up both before running pytest.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.models import Base


@pytest.fixture
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    """A fresh SQLite ledger (schema from the models) for the daemon and sensing tests."""
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}", sqlite_begin="immediate")
    Base.metadata.create_all(engine)
    return make_sessionmaker(engine)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Read Slurm's local times (recorded output) as UTC, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
