"""hopsd keeps nothing in memory of a job that ended (in-memory Slurm).

A daemon runs for weeks while thousands of jobs pass: whatever it holds per job
after the job ended grows without bound (``benchmarks/daemon_memory.py``
measures the process over hours of turnover). Here one job reports through the
probe (a checkpoint with progress past its claim, then progress from a second
report) and completes; after the tick that ends it, no per-job table of the
daemon's sensing and progress learning names it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from daemon_fakeport import FakeClock, FakePort
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.tick import Tick
from hopsd.slurm.tag import HopsTag


def _report(config: HopsConfig, job: int, node: str, seq: int, at: float, **fields: object) -> None:
    record = {"v": 1, "job": str(job), "run": 0, "node": node, "seq": seq, "at": at, **fields}
    folder = Path(config.spool_dir) / "alice"
    folder.mkdir(exist_ok=True)
    with open(folder / f"{job}.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


def _holding(sensing: Sensing, learner_seen: dict[str, float], job: int) -> list[str]:
    """The names of the per-job tables that still hold the job."""
    job_id = str(job)
    tables = {
        "reported": job_id in sensing.reported,
        "progress_only": job_id in sensing.progress_only,
        "beyond": job_id in sensing.beyond,
        "checkpoints": job in sensing.checkpoints,
        "report_seen": job_id in learner_seen,
    }
    return [name for name, held in tables.items() if held]


def test_nothing_of_an_ended_job_stays_in_hopsds_memory(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    sensing = Sensing(Path(config.spool_dir), uid_of=lambda user: os.getuid())
    tick = Tick(config, port, sessions, clock=clock, sensing=sensing)
    job = port.add_job(HopsTag((1,), 64))
    tick.run_once()
    (node,) = port.jobs[job].placement
    _report(config, job, node, 1, clock() + 1, kind="checkpoint", seconds=0.5, samples_done=90.0)
    _report(config, job, node, 2, clock() + 2, kind="progress", samples_done=100.0)
    clock.advance(3)
    tick.run_once()
    learner_seen = tick.reconciler.learner._report_seen
    held = _holding(sensing, learner_seen, job)
    assert "reported" in held, held  # the reports were read: the tables held it
    port.finish(job)
    clock.advance(2)
    tick.run_once()
    assert _holding(sensing, learner_seen, job) == []
