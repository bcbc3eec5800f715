"""What hops says of a job follows its state: the probe's final word counts, nothing stale.

Against the in-memory Slurm: a job's last report comes after the last tick that
saw it run (the probe flushes as the job ends); a job that ends and one that
goes back to the queue keep neither the planner's last sentence nor GPUs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from daemon_fakeport import FakeClock, FakePort
from spool_tick import make_tick, row_of
from tick_steps import observe_and_reconcile

from hopsd.config import HopsConfig
from hopsd.ledger.models import JobState
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((1,), 1000.0)


def report(config: HopsConfig, job: int, samples_done: float, seq: int) -> None:
    """One probe record of the job, as the probe appends it to its user's spool file."""
    record = {"kind": "run", "v": 1, "job": str(job), "run": 0, "node": "n", "seq": seq,
              "at": round(time.time(), 3), "iterations": 1, "samples": 10.0, "seconds": 1.0,
              "busy_s": 1.0, "t_d": [], "t_w": [], "samples_done": samples_done}  # fmt: skip
    path = Path(config.spool_dir) / "alice" / f"{job}.jsonl"
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def test_a_completed_job_shows_the_samples_of_its_final_flush(
    config: HopsConfig, port: FakePort, sessions, clock: FakeClock  # type: ignore[no-untyped-def]
) -> None:
    job = port.add_job(TAG, user="alice")
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"
    report(config, job, 380.0, 1)
    clock.advance(1)
    tick.run_once()
    assert row_of(sessions, job).samples_done == 380.0
    report(config, job, 1000.0, 2)  # the final flush, then the job ends before a tick
    port.finish(job)
    clock.advance(1)
    tick.run_once()
    row = row_of(sessions, job)
    assert row.state == JobState.DONE and row.samples_done == 1000.0
    assert row.plan_reason == "" and row.current_parts is None


def test_a_requeued_runs_last_report_reaches_the_ledger(
    config: HopsConfig, port: FakePort, sessions, clock: FakeClock  # type: ignore[no-untyped-def]
) -> None:
    """A run that did all its samples just before a requeue reached it: its last word
    is read as the job leaves the running state, so the rest of the move (which asks
    the ledger whether the run had finished) does not run the job again."""
    job = port.add_job(TAG, user="alice")
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    report(config, job, 400.0, 1)
    clock.advance(1)
    tick.run_once()
    report(config, job, 1000.0, 2)  # its last flush, then Slurm requeues it
    port.requeue_hold(job)
    observe_and_reconcile(tick)
    row = row_of(sessions, job)
    assert row.state in (JobState.PREEMPTED, JobState.REQUEUED)
    assert row.samples_done == 1000.0
