"""How fast ``hops`` answers, against ``squeue`` measured in the same run.

Builds a SQLite ledger of 1000 jobs (800 finished, 120 running, 80 queued,
each running job with a placement, three forecasts of each active job as
hopsd records them after its plans; ``--jobs 12000 --running 2000 --queued 10000``
is a large centre's queue), points a hops.conf at it and times, as
separate processes the way a user runs them: ``hops status --all`` (which also
asks Slurm for its nodes), ``hops status`` (the caller's own jobs: none, the
queue positions still read), ``hops status -u user3`` (one of the seven users'
jobs), ``hops status -u user0,...,user6`` (every job through the user filter, as
a user whose jobs are the whole queue reads them), ``hops version``, one Tab
completion of ``hops st``, and ``squeue`` (the baseline). Each figure is the median wall time of
``--runs`` runs after one warm-up; ``*_min_s`` is the fastest run and
``*_cpu_s`` the median CPU time (user + system, the child processes' own, which
other load on the machine does not inflate). ``import_s`` is the median wall
time of importing what ``hops status`` imports, in a fresh interpreter, without
running it. Python's bytecode cache is allowed (``PYTHONDONTWRITEBYTECODE`` is
dropped for these runs, as an installed hops has its bytecode compiled). Needs
the Slurm test cluster's environment (``docker/cluster.sh up``) for ``squeue``
and the node listing.

    .venv/bin/python benchmarks/cli_latency.py [--runs 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hopsd.core.model import Configuration
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.records import JobSpec, JobState, Prediction
from hopsd.ledger.unit import Ledger

BIN = Path(sys.executable).parent


def build_ledger(path: Path, jobs: int = 1000, running: int = 120, queued: int = 80) -> None:
    """A ledger shaped like a busy day: mostly finished jobs, some running, some queued
    (the last ``queued`` jobs wait; the ``running`` before them hold GPUs)."""
    finished = jobs - running - queued
    if finished < 0:
        raise SystemExit(f"cli_latency: {running} running + {queued} queued > {jobs} jobs")
    url = f"sqlite:///{path}"
    upgrade(url)
    ledger = Ledger.open(url)
    now = time.time()
    active: list[tuple[str, bool]] = []  # (job, running) of the jobs that have not ended
    with ledger.unit() as unit:
        for i in range(jobs):
            at = now - 86400 + i * 60
            spec = JobSpec(
                f"j{i}",
                f"user{i % 7}",
                (1, 2, 4),
                1e6,
                at,
                slurm_job_id=10000 + i,
                account="ml",
                script_path=f"/home/u/train{i % 5}.sh",
            )
            job = unit.add_job(spec, at)
            unit.transition(job.id, JobState.QUEUED, at)
            if i < finished + running:
                unit.transition(job.id, JobState.RUNNING, at + 30)
                unit.set_placement(job.id, Configuration.of("v100", {f"v100n{i % 2 + 1}": 2}))
            if i < finished:
                unit.transition(job.id, JobState.DONE, at + 600)
            else:
                active.append((job.id, i < finished + running))
        unit.record_predictions(_forecasts(active, now))
    ledger.dispose()


#: Forecasts hopsd made of each active job: one after each of the last rounds that moved
#: its start or end (STATE, START and ETA read the newest).
FORECASTS_PER_JOB = 3


def _forecasts(active: list[tuple[str, bool]], now: float) -> list[Prediction]:
    """Each active job's forecasts, oldest first: a running job's end, a waiting job's
    start and end, a little later in each newer forecast."""
    made = []
    for k in range(FORECASTS_PER_JOB):
        at = now - (FORECASTS_PER_JOB - k) * 60
        for n, (job_id, running) in enumerate(active):
            start = None if running else now + 60 * (n + k)
            made.append(
                Prediction(
                    job_id,
                    at,
                    "running" if running else "queued",
                    start,
                    now + 600 + 60 * (n + k),
                    "v100",
                    2,
                )
            )
    return made


#: What ``hops status`` imports before it reads the ledger (``import_s``).
STATUS_IMPORTS = (
    "import hops_cli.launch, hops_cli.quick, hops_cli.status_report, "
    "hops_cli.ledger_access, hopsd.views.status, hopsd.ledger.reader"
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    """Median and fastest wall seconds of ``argv`` and its median CPU seconds, after a warm-up."""
    subprocess.run(argv, env=env, check=True, capture_output=True)
    walls, cpus = [], []
    for _ in range(runs):
        cpu = _children_cpu()
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
        cpus.append(_children_cpu() - cpu)
    return {"": statistics.median(walls), "_min": min(walls), "_cpu": statistics.median(cpus)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs in the ledger")
    parser.add_argument("--running", type=int, default=120, help="of them running")
    parser.add_argument("--queued", type=int, default=80, help="of them waiting")
    args = parser.parse_args()
    squeue = shutil.which("squeue")
    if squeue is None:
        sys.exit("cli_latency: squeue not found; bring the test cluster up (docker/cluster.sh up)")
    hops = str(BIN / "hops")
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "ledger.sqlite"
        build_ledger(ledger, args.jobs, args.running, args.queued)
        conf = Path(tmp) / "hops.conf"
        conf.write_text(f'[ledger]\nurl = "sqlite:///{ledger}"\n')
        env = {**os.environ, "HOPS_CONF": str(conf)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        complete = {
            **env,
            "_HOPS_COMPLETE": "complete_bash",
            "COMP_WORDS": "hops st",
            "COMP_CWORD": "1",
        }
        commands = {
            "status": [hops, "status", "--all"],
            "status_own": [hops, "status"],  # the caller's own jobs: none in this ledger
            "status_user": [hops, "status", "-u", "user3"],  # one user's: a seventh of them
            # every user's, as a user's own status reads them: the whole queue one caller's
            "status_every_user": [hops, "status", "-u", ",".join(f"user{k}" for k in range(7))],
            "version": [hops, "version"],
            "completion": [hops],
            "squeue": [squeue],
            "import": [sys.executable, "-c", STATUS_IMPORTS],
            "python": [sys.executable, "-c", "pass"],
        }
        figures = {
            f"{name}{suffix}_s": value
            for name, argv in commands.items()
            for suffix, value in timed(
                argv, complete if name == "completion" else env, args.runs
            ).items()
        }
    figures = {k: round(v, 4) for k, v in figures.items()}
    figures["ratio_status_to_squeue"] = round(figures["status_s"] / figures["squeue_s"], 2)
    figures["runs"] = args.runs
    figures.update(jobs=args.jobs, running=args.running, queued=args.queued)
    figures["load_1min"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
        return
    for key, value in figures.items():
        print(f"{key:24s} {value}")


if __name__ == "__main__":
    main()
