"""How long hopsd takes to draw its status page and documents on a large centre's ledger.

hopsd serves ``/status`` (the HTML page, which reloads itself every 10 s in
every open tab), ``/status.json`` and ``/fairness.json`` from its own process,
beside its tick. This builds two SQLite ledgers with ``cli_latency.build_ledger``
(the large one: ``--jobs 12000 --running 2000 --queued 10000`` by default; the
baseline: 1000 jobs, 120 running and 80 waiting, measured in the same run),
and times each route in process as hopsd answers it
(``hopsd.views.page.documents``): the median wall and CPU seconds of
``--runs`` runs after one warm-up, the size of the answer, and the ratio of
the large ledger's time to the baseline's. The nodes come from Slurm's
``sinfo`` as in hopsd (with the test cluster down the page says Slurm is
unreachable; the time of that answer is included either way).

    .venv/bin/python benchmarks/status_page.py [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_latency import build_ledger

from hopsd.config import parse_config
from hopsd.ledger.unit import Ledger
from hopsd.views.page import documents

ROUTES = ("/status", "/status.json", "/fairness.json")


def timed_routes(url: str, runs: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds and the bytes of each route, as hopsd serves it."""
    config = parse_config(f'[ledger]\nurl = "{url}"\n')
    ledger = Ledger.open(url, timeout_ms=2000, sqlite_begin="deferred")
    pages = documents(ledger, config)
    out: dict[str, dict[str, float]] = {}
    try:
        for route in ROUTES:
            page = pages[route]
            assert callable(page)
            _, body = page()
            walls, cpus = [], []
            for _ in range(runs):
                wall, cpu = time.perf_counter(), time.process_time()
                _, body = page()
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
            out[route] = {
                "wall_s": round(statistics.median(walls), 4),
                "cpu_s": round(statistics.median(cpus), 4),
                "bytes": len(body),
            }
    finally:
        ledger.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=12000, help="jobs in the large ledger")
    parser.add_argument("--running", type=int, default=2000, help="of them running")
    parser.add_argument("--queued", type=int, default=10000, help="of them waiting")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the page's own log line when Slurm is away
    figures: dict[str, Any] = {"runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        sizes = {"baseline": (1000, 120, 80), "large": (args.jobs, args.running, args.queued)}
        for name, (jobs, running, queued) in sizes.items():
            path = Path(tmp) / f"{name}.sqlite"
            build_ledger(path, jobs, running, queued)
            figures[name] = {"jobs": jobs, "running": running, "queued": queued}
            figures[name].update(timed_routes(f"sqlite:///{path}", args.runs))
    figures["ratio_large_to_baseline"] = {
        route: round(figures["large"][route]["wall_s"] / figures["baseline"][route]["wall_s"], 1)
        for route in ROUTES
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for name in ("baseline", "large"):
        for route in ROUTES:
            f = figures[name][route]
            print(
                f"{name:9s} {route:15s} {f['wall_s']:.3f} s wall  {f['cpu_s']:.3f} s CPU  "
                f"{f['bytes']:>9,} bytes"
            )
    print(f"large / baseline: {figures['ratio_large_to_baseline']}")


if __name__ == "__main__":
    main()
