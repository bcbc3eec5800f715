"""What users' private reads of an SQLite ledger cost hopsd and the user.

hopsd's SQLite files are private; a user's ``hops status`` asks hopsd for a
copy (:func:`hopsd.ledger.private_copy.copy_for`). Measured on a ledger of N
jobs (each with a few throughput rows, several rounds of allocations) and
usage of 50 users:

* ``copy_full_s``: the copy for a trusted reader (``VACUUM INTO`` only);
* ``copy_trimmed_s``: the copy for one user under ``PrivateData=jobs,usage,accounts``;
* ``read_direct_s`` / ``read_copy_s``: the status read (active jobs, lease,
  latest round) on the ledger itself, as users did before, and on the copy;
* ``tick_quiet_s`` / ``tick_copying_s``: one daemon tick's ledger work alone,
  and while a thread makes copies back to back (the writer never waits for a
  WAL reader, so the difference is CPU and disk sharing only);
* ``tick_flooded_s``: the tick while a client asks hopsd's read service
  (:class:`hopsd.daemon.readservice.ReadService`) for copies back to back, as
  a user looping ``hops status`` would: copies are reused for ``REUSE_S``.

    .venv/bin/python benchmarks/ledger_copy.py [--jobs 2000] [--json]

Prints medians of 5 runs each and the ratios copy/direct and copying/quiet.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from ledger_tick import one_tick, populate

from hopsd.core.privacy import PrivateData, Viewer
from hopsd.daemon.readservice import ReadService
from hopsd.ledger import make_engine, make_sessionmaker, upgrade
from hopsd.ledger.private_copy import copy_for, fetch_copy
from hopsd.ledger.reader import reading
from hopsd.ledger.records import JobState
from hopsd.ledger.unit import Ledger
from hopsd.slurm.privacy import SlurmPrivacy

ALL = PrivateData(jobs=True, usage=True, accounts=True)


def _median(work: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _copy(path: Path, viewer: Viewer, rules: PrivateData) -> None:
    os.close(copy_for(path, viewer, rules))


def _status_read(url: str) -> int:
    with reading(url) as r:
        jobs = r.job_lines([JobState.QUEUED, JobState.RUNNING])
        r.lease_info()
        r.latest_round()
    return len(jobs)


def _full_size(path: Path) -> int:
    fd = copy_for(path, Viewer("root", True), ALL)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _fetch_and_drop(path: Path) -> None:
    fetch_copy(path, os.geteuid()).unlink()


def _stored_copy(path: Path) -> Path:
    fd = copy_for(path, Viewer("u7"), ALL)
    out = path.with_name("user-copy.sqlite")
    with os.fdopen(fd, "rb") as src:
        out.write_bytes(src.read())
    return out


def _tick_while(sessions: object, busy: Callable[[], None] | None, numbers: Iterator[int]) -> float:
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set() and busy is not None:
            busy()

    worker = threading.Thread(target=loop)
    worker.start()
    try:
        return _median(lambda: one_tick(sessions, next(numbers), 50))
    finally:
        stop.set()
        worker.join()


def measure(jobs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "ledger.sqlite"
        url = f"sqlite:///{path}"
        upgrade(url)
        sessions = make_sessionmaker(make_engine(url, sqlite_begin="immediate"))
        populate(sessions, jobs)
        for number in range(2, 12):
            one_tick(sessions, number, 50)
        ledger = Ledger.open(url)
        with ledger.unit() as unit:
            for k in range(50):
                unit.add_usage(f"u{k}", "acct", 0.0, 3600.0, 7200.0)
        ledger.dispose()
        copy = _stored_copy(path)
        numbers = itertools.count(12)
        out = {
            "jobs": float(jobs),
            "ledger_mib": _full_size(path) / 2**20,
            "copy_full_s": _median(partial(_copy, path, Viewer("root", True), ALL)),
            "copy_trimmed_s": _median(partial(_copy, path, Viewer("u7"), ALL)),
            "trimmed_mib": copy.stat().st_size / 2**20,
            "read_direct_s": _median(partial(_status_read, url)),
            "read_copy_s": _median(partial(_status_read, f"sqlite:///{copy}")),
            "tick_quiet_s": _tick_while(sessions, None, numbers),
            "tick_copying_s": _tick_while(
                sessions, partial(_copy, path, Viewer("u7"), ALL), numbers
            ),
        }
        service = ReadService(path, lambda: SlurmPrivacy(ALL))
        service.start()
        try:
            flood = partial(_fetch_and_drop, path)
            out["tick_flooded_s"] = _tick_while(sessions, flood, numbers)
            out["flood_copies_served"] = float(service.served)
        finally:
            service.close()
    out["copy_over_direct_read"] = out["copy_trimmed_s"] / out["read_direct_s"]
    out["tick_copying_over_quiet"] = out["tick_copying_s"] / out["tick_quiet_s"]
    out["tick_flooded_over_quiet"] = out["tick_flooded_s"] / out["tick_quiet_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(n) for n in args.jobs]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(
            f"{int(r['jobs']):>6} jobs  ledger {r['ledger_mib']:6.1f} MiB  "
            f"copy {r['copy_full_s'] * 1e3:7.1f} ms  trimmed {r['copy_trimmed_s'] * 1e3:7.1f} ms "
            f"({r['trimmed_mib']:.2f} MiB)  read direct {r['read_direct_s'] * 1e3:6.1f} ms  "
            f"on copy {r['read_copy_s'] * 1e3:6.1f} ms  tick {r['tick_quiet_s'] * 1e3:6.1f} ms "
            f"-> {r['tick_copying_s'] * 1e3:6.1f} ms while copying "
            f"(x{r['tick_copying_over_quiet']:.2f}), {r['tick_flooded_s'] * 1e3:6.1f} ms "
            f"flooded through the service (x{r['tick_flooded_over_quiet']:.2f}, "
            f"{int(r['flood_copies_served'])} answers)"
        )


if __name__ == "__main__":
    main()
