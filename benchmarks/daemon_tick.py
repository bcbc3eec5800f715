"""Cost of one hopsd tick with many pending hops jobs, on the live Slurm test cluster.

Submits N held, tagged jobs (plus a small baseline set measured in the same
run), drives a few ticks of the real daemon code in-process against the CLI
port, and prints per-step times and Slurm calls per tick. Jobs are cancelled at
the end.

    eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/daemon_tick.py [--jobs 1000] [--baseline 10] [--ticks 3] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
from hops_conf import live, render

from hopsd.config import parse_config
from hopsd.core.step import RoundClock
from hopsd.daemon.tick import Tick
from hopsd.daemon.tick_result import TickResult
from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.slurm.factory import make_port
from hopsd.slurm.runner import CountingRunner, SubprocessRunner
from hopsd.slurm.tag import HopsTag

#: The live cluster with the defaults' hour-long rounds: one tick is all that is timed.
CHANGES = {
    "slurm": {"timeout_s": 30.0},
    "scheduler": {
        "round_length_s": 3600.0,
        "queue_refresh_s": 30.0,
        "restart_penalty_s": None,
        "solver_time_limit_s": None,
        "max_demand_gpus": None,
    },
    "gpu_types.k80": None,
    "daemon": None,
}

STEPS = ("observe_s", "reconcile_s", "resume_s", "decide_s", "record_s", "enact_s", "total_s")


def submit_many(port, script: Path, n: int, prefix: str) -> list[int]:  # type: ignore[no-untyped-def]
    demands = [(1,), (1, 2), (2, 4), (1, 2, 4), (4,)]
    ids = []
    for i in range(n):
        tag = HopsTag(demands[i % len(demands)], 10_000 + 100 * i)
        args = ["-J", f"{prefix}{i}", "-o", "/dev/null", "-t", "5"]
        ids.append(port.submit(str(script), sbatch_args=args, tag=tag))
    return ids


def measure(n_jobs: int, ticks: int, workdir: Path) -> dict[str, object]:
    ledger = workdir / f"ledger-{n_jobs}.sqlite"
    config = parse_config(render(live(f"sqlite:///{ledger}", None, CHANGES)))
    migrate.upgrade(config.ledger_url)
    sessions = make_sessionmaker(make_engine(config.ledger_url, sqlite_begin="immediate"))
    runner = CountingRunner(SubprocessRunner())
    port = make_port("cli", run=runner, timeout_s=config.slurm_timeout_s)
    script = workdir / "sleep.sh"
    script.write_text("#!/bin/bash\nsleep 2\n")
    prefix = f"hopsbench{uuid.uuid4().hex[:6]}-"
    started = time.perf_counter()
    ids = submit_many(port, script, n_jobs, prefix)
    submit_s = time.perf_counter() - started
    tick = Tick(
        config,
        port,
        sessions,
        call_count=lambda: len(runner.calls),
        adopt_filter=lambda job: job.name.startswith(prefix),
    )
    results: list[TickResult] = []
    try:
        for _ in range(ticks):
            results.append(tick.run_once())
            tick.round_clock = RoundClock(tick.settings.round_length_s)  # a full round each tick
    finally:
        subprocess.run(["scancel", *map(str, ids)], capture_output=True, check=False, timeout=120)
    first, rest = results[0], results[1:] or results
    return {
        "jobs": n_jobs,
        "submit_s": round(submit_s, 3),
        "first_tick": {k: round(v, 4) for k, v in first.figures().items()},
        "steady_tick_median": {
            k: round(statistics.median(r.figures()[k] for r in rest), 4)
            for k in (*STEPS, "slurm_calls")
        },
        "adopted": len(first.reconcile.adopted) if first.reconcile else 0,
        "started_per_tick": [len(r.actions) for r in results],
        "window": [len(r.decision.plan.window) if r.decision else 0 for r in results],
    }


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send whatever native code prints (the solver's banner) to stderr, keeping --json clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--baseline", type=int, default=10)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not os.environ.get("SLURM_CONF"):
        print("daemon_tick: SLURM_CONF unset; start the test cluster first", file=sys.stderr)
        return 2
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp, stdout_to_stderr():
        base = measure(args.baseline, args.ticks, Path(tmp))
        big = measure(args.jobs, args.ticks, Path(tmp))
    ratio = {
        k: round(big["steady_tick_median"][k] / base["steady_tick_median"][k], 2)  # type: ignore[index]
        if base["steady_tick_median"][k]
        else None  # type: ignore[index]
        for k in STEPS
    }
    out = {"baseline": base, "measured": big, "ratio_measured_over_baseline": ratio}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for run in (base, big):
        print(f"{run['jobs']:>5} pending jobs (submitted in {run['submit_s']} s)")
        print(f"      first tick (adopts all): {run['first_tick']}")
        print(f"      steady tick median     : {run['steady_tick_median']}")
        print(f"      starts per tick: {run['started_per_tick']}  window: {run['window']}")
    print(f"ratio {args.jobs} / {args.baseline} jobs (steady median): {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
