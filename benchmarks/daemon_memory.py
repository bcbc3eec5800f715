"""Does hopsd's memory level off over hours of job turnover, or grow with every job seen?

A daemon runs for weeks; anything it keeps per job and never drops (a log-once
set, a learned figure, a cache keyed by job id) grows with every job that
passes, however few are active at a time. This benchmark runs hopsd's own tick
(:class:`hopsd.daemon.tick.Tick`, with its SQLite ledger) against the test
suite's in-memory Slurm (``daemon_fakeport.FakePort``) for ``--ticks`` ticks two
simulated seconds apart (3,600 ticks: two hours of a daemon ticking every two
seconds), while ``--active`` jobs are in the system at any time: each job runs
``--run-ticks`` ticks once hopsd started it, completes, and Slurm forgets it
``--forget-ticks`` ticks later (``MinJobAge``); a new job replaces it at once.
Thousands of jobs pass through while the active set stays the same size.

Every ``--every`` ticks the process's resident memory (VmRSS) is sampled. The
fake Slurm's own bookkeeping (its log of calls) is emptied every tick, so what
grows is hopsd's. Printed: jobs seen, the samples, the growth per 1,000 jobs
over the first half of the run (the warm-up: caches fill, the ledger's pages
are touched) and over the second half (the baseline against which a leak
shows: it should be near 0), and the ratio of the final RSS to the RSS after
the first ``--every`` ticks:

    .venv/bin/python benchmarks/daemon_memory.py [--ticks 3600] [--active 200] [--json]

With ``--trace`` the largest growths of Python allocations between the middle
and the end of the run are printed by source line (tracemalloc; slower).
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_fakeport import FakePort
from daemon_tick import rss_mb
from solver_scaling import silence_solver_banner
from tick_cpu import fake_daemon

from hopsd.slurm.tag import HopsTag

#: Simulated seconds between ticks.
TICK_S = 2.0


@dataclass
class Turnover:
    """The workload: which job started when, which ended when, how many were submitted."""

    run_ticks: int
    forget_ticks: int
    started: dict[int, int] = field(default_factory=dict)
    ended: dict[int, int] = field(default_factory=dict)
    submitted: int = 0

    def step(self, port: FakePort, tick: int, active: int, user: str) -> None:
        """Finish jobs that ran their time, forget old ended ones, top the active set up."""
        for job in list(port.jobs.values()):
            if job.state == "RUNNING":
                began = self.started.setdefault(job.job_id, tick)
                if tick - began >= self.run_ticks:
                    port.finish(job.job_id)
                    self.ended[job.job_id] = tick
        for job_id, at in list(self.ended.items()):
            if tick - at >= self.forget_ticks:
                port.forget(job_id)
                del self.ended[job_id]
                self.started.pop(job_id, None)
        live = sum(1 for j in port.jobs.values() if j.state in ("PENDING", "RUNNING"))
        for _ in range(active - live):
            demands = (1, 2) if self.submitted % 3 else (2, 4)
            port.add_job(HopsTag(demands, 1e9), user=user)
            self.submitted += 1
        # the fake Slurm's own logs: what it keeps is not hopsd's memory
        port.calls.clear()
        port.hold_batches.clear()
        port.gone.clear()  # hopsd saw each job end before Slurm forgot it
        port.run_log = [r for r in port.run_log if r.job_id in port.jobs]


def growth_per_1000_jobs(samples: list[dict[str, float]]) -> float:
    """MB of RSS per 1,000 jobs submitted between the first and the last sample."""
    first, last = samples[0], samples[-1]
    jobs = last["jobs"] - first["jobs"]
    return round(1000.0 * (last["rss_mb"] - first["rss_mb"]) / jobs, 2) if jobs > 0 else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    samples: list[dict[str, float]] = []
    top: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        tick, port, clock = fake_daemon(Path(tmp), args.nodes)
        load = Turnover(args.run_ticks, args.forget_ticks)
        user = getpass.getuser()  # a user the system knows: hopsd's spool refuses others
        middle = None
        started = time.monotonic()
        for n in range(1, args.ticks + 1):
            load.step(port, n, args.active, user)
            tick.run_once()
            clock.advance(TICK_S)
            if n % args.every == 0:
                samples.append({"tick": n, "jobs": load.submitted, "rss_mb": round(rss_mb(), 1)})
                print(f"tick {n}: {samples[-1]}", file=sys.stderr)
            if args.trace and n == args.ticks // 2:
                middle = tracemalloc.take_snapshot()
        if middle is not None:
            stats = tracemalloc.take_snapshot().compare_to(middle, "lineno")
            top = [str(s) for s in stats[:12]]
        seconds = time.monotonic() - started
    half = len(samples) // 2
    return {
        "ticks": args.ticks,
        "simulated_hours": round(args.ticks * TICK_S / 3600.0, 2),
        "active": args.active,
        "jobs": load.submitted,
        "wall_s": round(seconds, 1),
        "samples": samples,
        "first_half_mb_per_1000_jobs": growth_per_1000_jobs(samples[: half + 1]),
        "second_half_mb_per_1000_jobs": growth_per_1000_jobs(samples[half:]),
        "final_over_first_sample": round(samples[-1]["rss_mb"] / samples[0]["rss_mb"], 3),
        "trace_top_growth": top,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=3600, help="ticks, 2 simulated s apart")
    parser.add_argument("--active", type=int, default=200, help="jobs in the system at a time")
    parser.add_argument("--nodes", type=int, default=20, help="8-GPU nodes (half k80, half a100)")
    parser.add_argument("--run-ticks", type=int, default=10, help="ticks a started job runs")
    parser.add_argument("--forget-ticks", type=int, default=5, help="ticks Slurm shows it ended")
    parser.add_argument("--every", type=int, default=200, help="ticks between RSS samples")
    parser.add_argument("--trace", action="store_true", help="tracemalloc's top growths")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.ticks < 2 * args.every:
        parser.error("--ticks must hold at least two samples (2 x --every)")
    logging.disable(logging.WARNING)
    silence_solver_banner()
    if args.trace:
        tracemalloc.start()
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for key, value in out.items():
        if key not in ("samples", "trace_top_growth"):
            print(f"{key:30s} {value}")
    for s in out["samples"]:
        print(f"  tick {s['tick']:6d}  jobs {s['jobs']:6d}  RSS {s['rss_mb']} MB")
    for line in out["trace_top_growth"]:
        print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
