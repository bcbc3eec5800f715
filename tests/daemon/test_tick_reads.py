"""A tick sends the same statements to a ledger with 10 or 2000 finished jobs behind it.

What a tick reads must depend on the jobs it works on, never on the history:
fair-share usage is decayed and summed in SQL, finished jobs are never loaded.
Counted with SQLAlchemy's cursor events, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker
from tick_history import PgScratch, counted_ticks, sqlite_ledger

from hopsd.config import HopsConfig

SHORT, LONG = 12, 2000
PG_URL = os.environ.get("HOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

Factory = Callable[[], sessionmaker[Session]]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledgers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    if request.param == "sqlite":
        paths = iter(tmp_path / f"ledger{i}.sqlite" for i in range(10))
        yield lambda: sqlite_ledger(str(next(paths)))
        return
    try:
        scratch = PgScratch(PG_URL)
    except Exception as exc:  # unreachable server: skip with the reason
        pytest.skip(f"PostgreSQL unreachable at {PG_URL}: {exc}")
    yield scratch.ledger
    scratch.close()


def test_tick_statements_do_not_grow_with_the_history(ledgers: Factory, config: HopsConfig):
    short = counted_ticks(ledgers(), config, SHORT)
    long = counted_ticks(ledgers(), config, LONG)
    assert [c.statements for c in short] == [c.statements for c in long]
    assert [c.selects for c in short] == [c.selects for c in long]
    # the ticks did work: adoption, starts, observation (not an idle ledger)
    assert short[0].others > 0 and all(c.selects > 0 for c in short)
