"""What reading a large queue costs hopsd, from recorded ``squeue --json`` output (no Slurm).

The fixture is the test cluster's reply with 10,000 held hops jobs and 2,000
running jobs (``benchmarks/daemon_tick.py --record``). Times, each the median
of ``--runs`` runs: decoding and parsing the reply (``parse_jobs``), turning it
into the tick's observation (``observe``'s job views), adopting every hops job
into an empty SQLite ledger (one reconciliation), a steady reconciliation of
the same observation, and assembling the planner's snapshot (wall and CPU seconds). The nodes are
the test cluster's (``tests/fixtures/slurm/sinfo.22.05.json``). Figures only;
nothing is asserted.

    .venv/bin/python benchmarks/squeue_parse.py [--fixture FILE.json.xz] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import lzma
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
from hops_conf import live, render

from hopsd.config import HopsConfig, parse_config
from hopsd.daemon.assemble import assemble
from hopsd.daemon.observe import job_view, node_view
from hopsd.daemon.reconcile import Reconciler
from hopsd.daemon.snapshot_builder import build_cluster_view
from hopsd.daemon.views import Observation
from hopsd.ledger import migrate
from hopsd.ledger.unit import Ledger
from hopsd.slurm.parse_sinfo import parse_nodes
from hopsd.slurm.parse_squeue import parse_jobs

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
DEFAULT = FIXTURES / "squeue_10000_held_2000_running.22.05.json.xz"
CHANGES = {"scheduler": {"max_demand_gpus": None}, "gpu_types.k80": None, "daemon": None}
T = TypeVar("T")


#: CPU seconds (this process's) of each timed piece: what other load does not inflate.
CPU: dict[str, float] = {}


def timed(runs: int, work: Callable[[], T], name: str = "") -> tuple[float, T]:
    """Median wall seconds of ``runs`` calls of ``work`` and the last call's result."""
    times, cpus, out = [], [], None
    for _ in range(runs):
        started, cpu = time.perf_counter(), time.process_time()
        out = work()
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    assert out is not None
    if name:
        CPU[f"{name}_cpu_s"] = round(statistics.median(cpus), 3)
    return statistics.median(times), out


def reconcile_and_assemble(
    config: HopsConfig, obs: Observation, url: str, runs: int
) -> dict[str, float]:
    migrate.upgrade(url)
    ledger = Ledger.open(url)
    reconciler = Reconciler(config, lambda ids: {})
    view = build_cluster_view(obs.nodes, config, {})

    def reconcile(at: float) -> int:
        with ledger.unit() as unit:
            return len(reconciler.run(unit, obs, view, at).adopted)

    first_s, adopted = timed(1, lambda: reconcile(obs.at), "adopt_reconcile")
    steady_s, _ = timed(runs, lambda: reconcile(obs.at + 30), "steady_reconcile")

    def assembled() -> int:
        with ledger.unit() as unit:
            rows = [r for r in unit.active_jobs() if r.slurm_job_id is not None]
            ids = [r.id for r in rows]
            built = assemble(
                rows, obs, config, unit.latest_targets(ids), unit.throughput_snapshot(ids), obs.at
            )
            return len(built.snapshot.jobs)

    assemble_s, planned = timed(runs, assembled, "assemble")
    ledger.dispose()
    return {
        "adopted": adopted,
        "planned": planned,
        "adopt_reconcile_s": round(first_s, 3),
        "steady_reconcile_s": round(steady_s, 3),
        "assemble_s": round(assemble_s, 3),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=DEFAULT)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    text = lzma.decompress(args.fixture.read_bytes()).decode()
    parse_s, jobs = timed(args.runs, lambda: parse_jobs(text), "parse")
    nodes = tuple(node_view(n) for n in parse_nodes((FIXTURES / "sinfo.22.05.json").read_text()))
    views_s, views = timed(args.runs, lambda: tuple(job_view(j) for j in jobs), "observe_views")
    at = max((j.submit_time for j in views), default=0.0) + 60
    obs = Observation(at=at, jobs=views, nodes=nodes)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/ledger.sqlite"
        config = parse_config(render(live(url, None, CHANGES)))
        rest = reconcile_and_assemble(config, obs, url, args.runs)
    out = {
        "fixture": args.fixture.name,
        "reply_mb": round(len(text) / 1e6, 1),
        "jobs": len(jobs),
        "pending": sum(1 for j in jobs if j.pending),
        "running": sum(1 for j in jobs if j.running),
        "parse_s": round(parse_s, 3),
        "observe_views_s": round(views_s, 3),
        **rest,
        **CPU,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_1min": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:20s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
