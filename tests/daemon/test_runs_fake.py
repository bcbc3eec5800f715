"""Each Slurm run of a job is in the ledger: where it ran, from when, and why it ended.

Against the in-memory Slurm: a run hopsd started, one a requeue by hand stopped
(an admin's ``scontrol requeuehold``: not hops's doing), one hops stopped because
Slurm had started the job without a decision (a preemption), one that failed
and one that completed, each with its end and its reason.
"""

from __future__ import annotations

from daemon_fakeport import FakeClock, FakePort
from spool_tick import make_tick
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.daemon.tick import Tick
from hopsd.ledger.records import JobRun
from hopsd.ledger.unit import Ledger
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((4,), 1000.0)


def runs_of(sessions: sessionmaker[Session], job: int) -> list[JobRun]:
    with Ledger(sessions).reading() as unit:
        return unit.job_runs([str(job)])[str(job)]


def requeue_by_hand(port: FakePort, job: int) -> None:
    """What an admin's ``scontrol requeuehold`` does to a running job: pending and held
    again, one more restart."""
    fake = port.jobs[job]
    fake.state, fake.placement, fake.restarts = "PENDING", {}, fake.restarts + 1
    fake.held = True


def tick_until_running(tick: Tick, port: FakePort, clock: FakeClock, job: int) -> None:
    """Ticks a second apart until Slurm runs the job, then one more that sees it."""
    for _ in range(30):
        clock.advance(1)
        tick.run_once()
        if port.jobs[job].state == "RUNNING":
            break
    clock.advance(1)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING", (port.actions(job), vars(port.jobs[job]))


def test_every_run_is_recorded_with_its_place_start_end_and_why_it_ended(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    job = port.add_job(TAG, user="alice")
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()  # placed and released
    clock.advance(1)
    tick.run_once()  # seen running
    (first,) = runs_of(sessions, job)
    assert first.run == 0 and first.kind == "run" and first.end_time is None
    assert first.ended == "" and sum(g for _, g in first.parts) == 4
    assert first.gpu_type == "a100" and first.start_time == clock.now

    clock.advance(5)
    requeue_by_hand(port, job)
    tick.run_once()
    first = runs_of(sessions, job)[0]
    assert first.end_time == clock.now and first.ended == "requeued"

    tick_until_running(tick, port, clock, job)
    runs = runs_of(sessions, job)
    assert [r.run for r in runs] == [0, 1] and runs[1].end_time is None
    clock.advance(3)
    port.finish(job, "FAILED")
    tick.run_once()
    last = runs_of(sessions, job)[-1]
    assert last.ended == "failed" and last.end_time == clock.now


def test_a_run_hops_stopped_says_so_and_a_completed_run_says_completed(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    job = port.add_job(TAG, user_hold=True)
    port.owner_release(job, start_on={"fast1": 4})  # Slurm starts it without a decision
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()  # hops requeues it held, and follows its own requeue in the same tick
    (stopped,) = runs_of(sessions, job)
    assert (stopped.ended, stopped.end_time) == ("preempted", clock.now)
    clock.advance(1)
    tick.run_once()  # sees it pending again
    (unplanned,) = runs_of(sessions, job)[:1]
    assert unplanned.ended == "preempted" and unplanned.end_time is not None
    tick_until_running(tick, port, clock, job)
    port.finish(job)
    clock.advance(2)
    tick.run_once()
    runs = runs_of(sessions, job)
    assert [(r.run, r.ended) for r in runs] == [(0, "preempted"), (1, "completed")]
    assert all(r.end_time is not None and r.end_time >= r.start_time for r in runs)
