"""How long one daemon tick spends in the ledger, on SQLite and on PostgreSQL.

A tick here is what the daemon writes every interval with N running jobs:
renew the lease, load the active jobs, update every job's wait / service /
samples, record the round and one allocation row per job, record the round's
intents and commit (before acting), then mark them done in a second
transaction (after acting). Also timed: loading the throughput store of all
jobs into memory (what the planner reads once per round).

    .venv/bin/python benchmarks/ledger_tick.py [--jobs 2000] [--ticks 7] [--json]

PostgreSQL comes from ``HOPS_TEST_PG_URL`` (default the CI server); a scratch
database ``hops_bench_<random>`` is created and dropped. Prints the median and
minimum wall time per tick of each backend and the PostgreSQL / SQLite ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.model import Configuration
from hopsd.ledger import (
    AllocationChange,
    AllocationReason,
    IntentAction,
    IntentRequest,
    JobProgress,
    JobSpec,
    JobState,
    RoundSummary,
    SqlThroughputStore,
    ThroughputLayer,
    acquire_lease,
    active_jobs,
    add_job,
    apply_progress,
    load_throughput_store,
    make_engine,
    make_sessionmaker,
    mark_done_many,
    record_allocations,
    record_intents,
    record_round,
    renew_lease,
    set_current_config,
    transition,
    upgrade,
)

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
HOLDER = "bench:1"
NODES = 250  # 250 nodes x 8 GPUs: one 8-GPU slice per job at 2000 jobs


def _config(i: int) -> Configuration:
    return Configuration.of("a100", {f"n{i % NODES:03d}": 1 + i % 4})


def populate(Sessions: sessionmaker[Session], jobs: int) -> None:
    """Jobs already running, with a few throughput rows each, as in a busy cluster."""
    with Sessions.begin() as s:
        acquire_lease(s, HOLDER, ttl_s=600.0, now=0.0)
        for i in range(jobs):
            row = add_job(s, JobSpec(f"{i}", f"u{i % 50}", (1, 2, 4), 1e7, 0.0), now=0.0)
            for state in (JobState.QUEUED, JobState.RUNNING):
                transition(row, state, now=1.0)
            set_current_config(row, _config(i))
        s.flush()
        store = SqlThroughputStore(s, now=1.0)
        for i in range(jobs):
            store.observe(ThroughputLayer.TYPE_AGGREGATED, f"{i}", "a100", 1, 50.0 + i % 7)
            store.observe(ThroughputLayer.ENTITY_AGGREGATED, f"{i}", _node(i), 1 + i % 4, 48.0)


def _node(i: int) -> str:
    return f"n{i % NODES:03d}"


def one_tick(Sessions: sessionmaker[Session], number: int, intents: int) -> None:
    now = 100.0 * number
    with Sessions.begin() as s:
        renew_lease(s, HOLDER, ttl_s=600.0, now=now)
        rows = active_jobs(s)
        updates = [
            JobProgress(
                r.id,
                wait_time=r.wait_time + 1.0,
                service_gpu_s=r.service_gpu_s + 100.0,
                service_norm=r.service_norm + 80.0,
                samples_done=r.samples_done + 5000.0,
            )
            for r in rows
        ]
        apply_progress(s, updates, now=now)
        round_id = record_round(
            s, RoundSummary(number=number, started_at=now, running=len(rows), window_size=len(rows))
        ).id
        changes = [AllocationChange(r.id, AllocationReason.KEEP, _config(int(r.id))) for r in rows]
        record_allocations(s, round_id, changes, now=now)
        requests = [
            IntentRequest(rows[k].id, IntentAction.UPDATE, {"nodelist": _node(k), "round": number})
            for k in range(min(intents, len(rows)))
        ]
        written = record_intents(s, requests, round_id, now=now)
    with Sessions.begin() as s:  # after enactment: a separate, short transaction
        mark_done_many(s, [intent.id for intent in written], now=now + 1.0)


def load_store(Sessions: sessionmaker[Session]) -> int:
    with Sessions() as s:
        ids = [r.id for r in active_jobs(s)]
        store = load_throughput_store(s, ids)
    return sum(store.type_aggregated(i, "a100", 1) is not None for i in ids)


def measure(url: str, jobs: int, ticks: int, intents: int) -> dict[str, float]:
    upgrade(url)
    engine = make_engine(url, sqlite_begin="immediate")
    try:
        Sessions = make_sessionmaker(engine)
        populate(Sessions, jobs)
        one_tick(Sessions, 1, intents)  # warm-up: caches, prepared plans
        times = [_timed(partial(one_tick, Sessions, n, intents)) for n in range(2, ticks + 2)]
        loads = [_timed(lambda: load_store(Sessions)) for _ in range(3)]
    finally:
        engine.dispose()
    return {
        "tick_median_s": statistics.median(times),
        "tick_min_s": min(times),
        "store_load_median_s": statistics.median(loads),
    }


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@contextmanager
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="hops_bench_") as tmp:
        yield f"sqlite:///{Path(tmp) / 'ledger.db'}"


@contextmanager
def postgres_url(base: str) -> Iterator[str]:
    url = make_url(base)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    admin = create_engine(
        url.set(database="postgres"),
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": 3},
    )
    name = f"hops_bench_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        try:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            admin.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--ticks", type=int, default=7, help="timed ticks per backend")
    parser.add_argument("--intents", type=int, default=200, help="intents written per tick")
    parser.add_argument("--pg-url", default=os.environ.get("HOPS_TEST_PG_URL", DEFAULT_PG))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    results: dict[str, object] = {"jobs": args.jobs, "ticks": args.ticks, "intents": args.intents}
    with sqlite_url() as url:
        results["sqlite"] = measure(url, args.jobs, args.ticks, args.intents)
    try:
        with postgres_url(args.pg_url) as url:
            results["postgresql"] = measure(url, args.jobs, args.ticks, args.intents)
    except Exception as exc:  # report, do not hide, an unreachable server
        results["postgresql"] = None
        results["postgresql_error"] = str(exc).splitlines()[0]
    sqlite = results["sqlite"]
    pg = results["postgresql"]
    if isinstance(sqlite, dict) and isinstance(pg, dict):
        results["ratio_pg_over_sqlite"] = pg["tick_median_s"] / sqlite["tick_median_s"]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print_table(results)
    return 0


def _print_table(results: dict[str, object]) -> None:
    print(
        f"ledger tick: {results['jobs']} running jobs, {results['intents']} intents, "
        f"median of {results['ticks']} ticks"
    )
    for backend in ("sqlite", "postgresql"):
        figures = results.get(backend)
        if not isinstance(figures, dict):
            print(f"  {backend:<10}  unavailable: {results.get('postgresql_error', '')}")
            continue
        print(
            f"  {backend:<10}  tick median {figures['tick_median_s'] * 1000:8.1f} ms"
            f"  min {figures['tick_min_s'] * 1000:8.1f} ms"
            f"  store load {figures['store_load_median_s'] * 1000:7.1f} ms"
        )
    if "ratio_pg_over_sqlite" in results:
        print(f"  PostgreSQL / SQLite tick time: {results['ratio_pg_over_sqlite']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
