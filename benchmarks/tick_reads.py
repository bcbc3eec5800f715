"""What one hopsd tick reads from a ledger with a short and with a long history.

Two ledgers hold the same active jobs (10, driven through the real tick against
the test suite's in-memory Slurm); behind them lie 12 or 2000 finished jobs
with their allocations, intents, rounds, measurements and usage buckets. For
each ledger this prints the statements per tick (reads, writes), the time the
tick spent executing its reads (median and minimum over the ticks after the
first two, between SQLAlchemy's before/after cursor events: fetching the rows
is not included, which is why the usage reads are also timed whole) and the
long / short ratio; and, on the long
history, the fair-share usage read as hops did it before (one row per owner
and hourly bucket, decayed in Python: the baseline) against the SQL aggregate
it uses now. On SQLite and, when it answers, on PostgreSQL
(``HOPS_TEST_PG_URL``; a scratch database is created and dropped).

    .venv/bin/python benchmarks/tick_reads.py [--short 12] [--long 2000] [--ticks 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "daemon"))

from hops_conf import FAKE, merged, render  # noqa: E402
from sqlalchemy import func, select  # noqa: E402
from sqlalchemy.orm import Session, sessionmaker  # noqa: E402
from tick_history import START, Counted, PgScratch, counted_ticks, sqlite_ledger  # noqa: E402

from hopsd.config import HopsConfig, parse_config  # noqa: E402
from hopsd.core.fairshare import decay  # noqa: E402
from hopsd.ledger.models import UsageRow  # noqa: E402
from hopsd.ledger.usage import decayed_usage_by_owner  # noqa: E402

PG_URL = os.environ.get("HOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

WARMUP = 2


def summary(ticks: list[Counted], finished: int) -> dict[str, Any]:
    steady = ticks[WARMUP:]
    return {
        "finished_jobs": finished,
        "selects_per_tick": [c.selects for c in ticks],
        "writes_per_tick": [c.others for c in ticks],
        "steady_selects": steady[-1].selects,
        "read_ms_median": round(statistics.median(c.read_s for c in steady) * 1000, 3),
        "read_ms_min": round(min(c.read_s for c in steady) * 1000, 3),
    }


def usage_reads(sessions: sessionmaker[Session], repeat: int = 20) -> dict[str, Any]:
    """Fair-share usage read the way hops did before (a row per owner and bucket, decayed
    in Python: the baseline) and as it does now (decayed and summed in SQL)."""
    now, half_life = START + 60.0, 24 * 3600.0
    with sessions() as s:
        stmt = select(UsageRow.user, UsageRow.interval_end, func.sum(UsageRow.gpu_s_norm))
        stmt = stmt.group_by(UsageRow.user, UsageRow.interval_end)

        def before() -> int:
            rows = s.execute(stmt).all()
            totals: dict[str, float] = {}
            for name, end, value in rows:
                totals[name] = totals.get(name, 0.0) + value * decay(now - end, half_life)
            return len(rows)

        def after() -> int:
            users, _ = decayed_usage_by_owner(s, now, half_life)
            return len(users)

        out: dict[str, Any] = {}
        for name, read in (("per_bucket_baseline", before), ("sql_aggregate", after)):
            spent = []
            for _ in range(repeat):
                started = time.perf_counter()
                rows = read()
                spent.append(time.perf_counter() - started)
            out[name] = {"rows": rows, "ms_median": round(statistics.median(spent) * 1000, 3)}
    out["ratio_sql_to_baseline"] = round(
        out["sql_aggregate"]["ms_median"] / out["per_bucket_baseline"]["ms_median"], 3
    )
    return out


def compare(make: Any, config: HopsConfig, short: int, long: int, ticks: int) -> dict[str, Any]:
    a = counted_ticks(make(), config, short, ticks)
    long_ledger = make()
    b = counted_ticks(long_ledger, config, long, ticks)
    out: dict[str, Any] = {"short": summary(a, short), "long": summary(b, long)}
    out["statements_equal"] = [c.statements for c in a] == [c.statements for c in b]
    base = out["short"]["read_ms_median"] or 1e-9
    out["read_time_ratio_long_to_short"] = round(out["long"]["read_ms_median"] / base, 3)
    out["usage_read_long_history"] = usage_reads(long_ledger)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=12)
    parser.add_argument("--long", type=int, default=2000)
    parser.add_argument("--ticks", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        spool = Path(tmp) / "spool"
        spool.mkdir()
        daemon = {"spool_dir": str(spool), "requeue_quiet_s": 0.0}
        config = parse_config(render(merged(FAKE, {"daemon": daemon})))
        paths = iter(Path(tmp) / f"ledger{i}.sqlite" for i in range(2))
        results["sqlite"] = compare(
            lambda: sqlite_ledger(str(next(paths))), config, args.short, args.long, args.ticks
        )
        try:
            scratch = PgScratch(PG_URL, prefix="hops_bench_reads")
        except Exception as exc:  # no server: say so, keep the SQLite figures
            results["postgresql"] = {"skipped": str(exc).splitlines()[0]}
        else:
            try:
                results["postgresql"] = compare(
                    scratch.ledger, config, args.short, args.long, args.ticks
                )
            finally:
                scratch.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for backend, got in results.items():
        if "skipped" in got:
            print(f"{backend}: skipped ({got['skipped']})")
            continue
        for name in ("short", "long"):
            s = got[name]
            print(
                f"{backend:10s} {s['finished_jobs']:5d} finished jobs: "
                f"{s['steady_selects']} reads per steady tick, "
                f"reads took {s['read_ms_median']:.2f} ms (median)"
            )
        print(
            f"{backend:10s} same statements: {got['statements_equal']}; "
            f"read time long/short: {got['read_time_ratio_long_to_short']:.2f}"
        )
        u = got["usage_read_long_history"]
        old, new = u["per_bucket_baseline"], u["sql_aggregate"]
        print(
            f"{backend:10s} fair-share usage, long history: per-bucket baseline "
            f"{old['rows']} rows {old['ms_median']:.2f} ms, SQL aggregate {new['rows']} rows "
            f"{new['ms_median']:.2f} ms (ratio {u['ratio_sql_to_baseline']:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
