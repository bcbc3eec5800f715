"""Ledgers with a short or a long history, and what one tick sends to them.

Shared by ``test_tick_reads.py`` and ``benchmarks/tick_reads.py``. Both ledgers
get the same active workload (driven through the real tick against the
in-memory Slurm of :mod:`daemon_fakeport`); they differ only in how many
finished jobs lie behind it, each with its allocations, done intents, a round,
a measured throughput and an hour of usage for every user. Usage is spread
evenly over the users, so the fair-share factors, and with them the plans,
are the same whatever the history's length.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from daemon_fakeport import FakeClock, FakePort, small_cluster
from sqlalchemy import Engine, create_engine, event, insert, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.daemon.tick import Tick
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.models import (
    AllocationRow,
    IntentRow,
    JobRow,
    RoundRow,
    ThroughputRow,
    UsageRow,
)
from hopsd.slurm.tag import HopsTag

USERS = ("alice", "bob", "carol", "dave")
ACTIVE = 10
START = 1.0e7
HOUR = 3600.0


@dataclass
class Counted:
    """Statements one tick sent, split into reads and the rest, and the reads' time."""

    selects: int = 0
    others: int = 0
    read_s: float = 0.0
    statements: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.selects + self.others


@contextmanager
def counting(engine: Engine) -> Iterator[Counted]:
    """Count every statement sent on ``engine`` (SQLAlchemy's cursor events)."""
    counted = Counted()
    started: list[float] = []

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        started.append(time.perf_counter())

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        spent = time.perf_counter() - started.pop()
        counted.statements.append(statement.split(None, 1)[0].upper())
        counted.texts.append(statement)
        if statement.lstrip().upper().startswith("SELECT"):
            counted.selects += 1
            counted.read_s += spent
        else:
            counted.others += 1

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    try:
        yield counted
    finally:
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)


def add_history(sessions: sessionmaker[Session], finished: int, before: float) -> None:
    """``finished`` ended jobs (a multiple of the users) in the hours before ``before``."""
    hours = max(finished // len(USERS), 1)
    end_of = [before - HOUR * (1 + i // len(USERS)) for i in range(finished)]
    jobs = [_finished_job(i, USERS[i % len(USERS)], end_of[i]) for i in range(finished)]
    with sessions.begin() as s:
        s.execute(insert(JobRow), jobs)
        s.execute(insert(RoundRow), [_round(i, end_of[i]) for i in range(finished)])
        s.execute(
            insert(AllocationRow), [a for i in range(finished) for a in _allocs(i, end_of[i])]
        )
        s.execute(insert(IntentRow), [x for i in range(finished) for x in _intents(i, end_of[i])])
        s.execute(insert(ThroughputRow), [_rate(i, end_of[i]) for i in range(finished)])
        bucket = before - before % HOUR
        usage = [
            {
                "user": user,
                "account": "acct",
                "interval_start": bucket - HOUR * (h + 1),
                "interval_end": bucket - HOUR * h,
                "gpu_s": 7200.0,
                "gpu_s_norm": 14400.0,
            }
            for h in range(hours)
            for user in USERS
        ]
        s.execute(insert(UsageRow), usage)


def _finished_job(i: int, user: str, end: float) -> dict[str, Any]:
    return {
        "id": f"h{i}",
        "slurm_job_id": 5_000_000 + i,
        "user": user,
        "account": "acct",
        "demands": [1, 2],
        "total_samples": 1.0e5,
        "batch_size": 32,
        "state": "done",
        "state_reason": "slurm COMPLETED",
        "state_changed_at": end,
        "submit_time": end - 2 * HOUR,
        "first_start_time": end - HOUR,
        "end_time": end,
        "wait_time": HOUR,
        "service_gpu_s": 2 * HOUR,
        "service_norm": 4 * HOUR,
        "samples_done": 1.0e5,
        "tag_status": "valid",
        "latency_ratio": 1.0,
        "updated_at": end,
    }


def _round(i: int, end: float) -> dict[str, Any]:
    return {"id": 1_000_000 + i, "number": 1_000_000 + i, "started_at": end - HOUR, "shadow": False}


def _allocs(i: int, end: float) -> list[dict[str, Any]]:
    where = {"gpu_type": "a100", "parts": [["fast1", 2]], "total_gpus": 2}
    none = {"gpu_type": None, "parts": None, "total_gpus": 0}
    return [
        {
            "round_id": 1_000_000 + i,
            "job_id": f"h{i}",
            "reason": "start",
            "at": end - HOUR,
            **where,
        },
        {"round_id": None, "job_id": f"h{i}", "reason": "end", "at": end, **none},
    ]


def _intents(i: int, end: float) -> list[dict[str, Any]]:
    return [
        {
            "idempotency_key": f"history:{i}:{action}",
            "round_id": 1_000_000 + i,
            "job_id": f"h{i}",
            "action": action,
            "payload": {"slurm_id": 5_000_000 + i},
            "state": "done",
            "error": "",
            "created_at": end - HOUR,
            "finished_at": end - HOUR,
        }
        for action in ("update", "release")
    ]


def _rate(i: int, end: float) -> dict[str, Any]:
    return {
        "job_id": f"h{i}",
        "layer": "entity_agg",
        "place": "fast1",
        "size": 2,
        "per_gpu": 100.0,
        "observations": 3,
        "samples": 1.0e5,
        "updated_at": end,
    }


def workload_port(clock: FakeClock) -> FakePort:
    """The active jobs every ledger sees: more than the cluster holds, so some wait."""
    port = FakePort(small_cluster())
    for i in range(ACTIVE):
        demands = ((1, 2), (2, 4), (1,))[i % 3]
        port.add_job(HopsTag(demands, 1.0e7), user=USERS[i % len(USERS)], submit_time=clock())
    return port


def tick_config(config: HopsConfig) -> HopsConfig:
    """Fair share on, so its usage query is part of every tick."""
    return replace(config, fairshare_weight=1.0)


def counted_ticks(
    sessions: sessionmaker[Session], config: HopsConfig, finished: int, ticks: int = 4
) -> list[Counted]:
    """Add the history, then count the statements of each of ``ticks`` ticks."""
    clock = FakeClock(START)
    add_history(sessions, finished, clock())
    port = workload_port(clock)
    tick = Tick(tick_config(config), port, sessions, clock=clock)
    # every forecast costs nothing: the duty cycle reads CPU time, which differs from run
    # to run (the first forecast of a process pays its imports), and would skip a forecast
    # and its writes in one run and not in the other
    tick.forecaster.cpu_clock = lambda: 0.0
    engine = sessions.kw["bind"]
    out = []
    for _ in range(ticks):
        with counting(engine) as counted:
            tick.run_once()
        out.append(counted)
        clock.advance(2.0)
    return out


def sqlite_ledger(path: str) -> sessionmaker[Session]:
    url = f"sqlite:///{path}"
    upgrade(url)
    return make_sessionmaker(make_engine(url, sqlite_begin="immediate"))


class PgScratch:
    """A scratch PostgreSQL database of this suite; one schema per ledger, dropped at close."""

    def __init__(self, base_url: str, prefix: str = "hops_tick_reads") -> None:
        self.base = make_url(base_url)
        if self.base.drivername == "postgresql":
            self.base = self.base.set(drivername="postgresql+psycopg")
        self.admin = create_engine(
            self.base.set(database="postgres"),
            isolation_level="AUTOCOMMIT",
            connect_args={"connect_timeout": 3},
        )
        self.database = f"{prefix}_{uuid.uuid4().hex[:8]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.database}"'))
        self.engines: list[Engine] = []

    def ledger(self) -> sessionmaker[Session]:
        url = self.base.set(database=self.database)
        schema = f"s_{uuid.uuid4().hex[:8]}"
        owner = create_engine(url, isolation_level="AUTOCOMMIT")
        with owner.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        owner.dispose()
        scoped = url.update_query_dict({"options": f"-csearch_path={schema}"})
        upgrade(scoped.render_as_string(hide_password=False))
        engine = make_engine(scoped)
        self.engines.append(engine)
        return make_sessionmaker(engine)

    def close(self) -> None:
        for engine in self.engines:
            engine.dispose()
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))
        self.admin.dispose()
