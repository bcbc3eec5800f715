"""Fixtures of the daemon tests: a fresh ledger, a fake port, a config."""

from __future__ import annotations

from pathlib import Path

import pytest
from daemon_fakeport import FakePort, small_cluster
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig, parse_config
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.models import Base

CONF = """
[slurm]
partitions = ["slow", "fast"]
[scheduler]
round_length_s = 10.0
queue_refresh_s = 1.0
restart_penalty_s = 1.0
[gpu_types.k80]
speed = 1.0
[gpu_types.a100]
speed = 4.0
[metrics]
address = ""
"""


@pytest.fixture
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}", sqlite_begin="immediate")
    Base.metadata.create_all(engine)
    return make_sessionmaker(engine)


@pytest.fixture
def config(tmp_path: Path) -> HopsConfig:
    spool = tmp_path / "spool"
    spool.mkdir()
    return parse_config(CONF + f'[daemon]\nspool_dir = "{spool}"\n')


@pytest.fixture
def port() -> FakePort:
    return FakePort(small_cluster())


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
