"""Exactly once: a requeue that races a job's end, releases only when Slurm is ready.

The in-memory Slurm here behaves as Slurm 22.05 was seen to on the test
cluster: ``requeuehold`` also requeues a job whose script has just completed,
a requeued job shows COMPLETING until its old run has left its nodes, and
accounting (``sacct -D``) keeps each run with its batch step.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from daemon_fakeport import FakeClock, FakePort, a100_pays_8x, small_cluster
from sqlalchemy import select
from tick_steps import observe_and_reconcile

from hopsd.config import HopsConfig
from hopsd.daemon.requeue_check import (
    RunEnd,
    hit_an_ended_run,
    judge_requeued_run,
    last_requeued_run,
)
from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_history
from hopsd.ledger.intents import pending_intents
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import AllocationReason, IntentAction, IntentRow, IntentState, JobState
from hopsd.slurm.errors import SlurmCommandError
from hopsd.slurm.parse_sacct import parse_runs
from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import RunRecord, SlurmJob
from hopsd.slurm.tag import HopsTag

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


# ------------------------------------------------------------------ the verdict


def test_recorded_runs_tell_a_finished_script_from_a_stopped_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real sacct -D output: job 1 finished at :34 and was requeued at :37 (hit after its
    end); job 2 was killed by the requeue; job 3 trapped SIGTERM and exited 0 after it."""
    monkeypatch.setenv("TZ", "UTC")
    runs = parse_runs((FIXTURE / "sacct_runs_requeued.22.05.txt").read_text())
    verdicts = {j: judge_requeued_run(last_requeued_run(runs, j)) for j in (1, 2, 3, 10)}
    assert verdicts[1].end == RunEnd.FINISHED and verdicts[1].final_state == "COMPLETED"
    assert verdicts[2].end == RunEnd.STOPPED
    assert verdicts[3].end == RunEnd.STOPPED  # checkpointed and exited 0 *after* the requeue
    assert verdicts[10].end == RunEnd.STOPPED
    first = next(r for r in runs if r.job_id == 1)
    assert (first.batch_state, first.batch_exit_code, first.batch_signal) == ("COMPLETED", 0, 0)
    assert first.batch_end_time is not None and first.end_time is not None
    assert first.end_time - first.batch_end_time == 3.0


def test_recorded_same_second_runs_are_told_apart_by_the_allocation_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Job 233 ended 150 ms before the requeue, job 234 exited 0 on the requeue's SIGTERM:
    sacct shows both COMPLETED 0:0 in the requeue's second; squeue tells them apart."""
    monkeypatch.setenv("TZ", "UTC")
    runs = parse_runs((FIXTURE / "sacct_runs_same_second.22.05.txt").read_text())
    for job in (233, 234):
        assert judge_requeued_run(last_requeued_run(runs, job)).end == RunEnd.AMBIGUOUS
    text = (FIXTURE / "squeue_requeued_finished_vs_stopped.22.05.json").read_text()
    jobs = {j.job_id: j for j in parse_jobs(text)}
    assert all(jobs[j].pending and jobs[j].held for j in (233, 234))
    assert hit_an_ended_run(jobs[233]) and not hit_an_ended_run(jobs[234])
    assert jobs[230].alloc_tres and not jobs[231].alloc_tres  # cancelled since; same pattern
    # Slurm 24.11.5 keeps and clears it the same way (6 ended first, 7 exited on SIGTERM)
    text = (FIXTURE / "squeue_requeued_finished_vs_stopped.24.11.json").read_text()
    newer = {j.job_id: j for j in parse_jobs(text)}
    assert newer[6].pending and newer[6].held and newer[7].pending and newer[7].held
    assert hit_an_ended_run(newer[6]) and not hit_an_ended_run(newer[7])


@pytest.mark.parametrize(
    ("batch", "code", "sig", "end", "expected"),
    [
        ("COMPLETED", 0, 0, 99.0, RunEnd.FINISHED),
        ("FAILED", 2, 0, 99.9, RunEnd.FINISHED),
        ("COMPLETED", 0, 0, 100.7, RunEnd.AMBIGUOUS),  # same second as the requeue
        ("CANCELLED", 0, 15, 100.2, RunEnd.STOPPED),
        ("FAILED", 0, 9, 100.0, RunEnd.STOPPED),
        ("COMPLETED", 0, 0, 101.0, RunEnd.STOPPED),
        ("RUNNING", 0, 0, None, RunEnd.UNSETTLED),
        (None, 0, 0, None, RunEnd.UNSETTLED),
    ],
)
def test_verdicts(
    batch: str | None, code: int, sig: int, end: float | None, expected: RunEnd
) -> None:
    run = RunRecord(7, "REQUEUED", 50.0, 100.4, batch, code, sig, end)
    assert judge_requeued_run(run).end == expected
    assert judge_requeued_run(None).end == RunEnd.UNSETTLED


# ------------------------------------------------------------------ a Slurm-like port


class RacingPort(FakePort):
    """Requeues finished jobs (as Slurm does) and shows COMPLETING for a while."""

    def __init__(self) -> None:
        super().__init__(small_cluster())
        self.finish_at_requeue: set[int] = set()
        self.completing_reads = 0
        self.leaving: dict[int, int] = {}
        self.failed_launches: set[int] = set()
        self.exit_on_term: set[int] = set()  # scripts that exit 0 at once on SIGTERM
        self.kept_alloc: set[int] = set()  # Slurm kept the ended run's allocation record
        self.end_unheard: set[int] = set()  # ended, but slurmctld had not heard of it yet
        self.outputs: dict[int, Path] = {}

    def requeue_hold(self, job_id: int) -> None:
        job = self._act("requeue_hold", job_id)
        if job_id in self.end_unheard:
            # the script had exited, the requeue got there first: Slurm treats it as a
            # stop (allocation record cleared), only slurmstepd's missing line tells
            ended = RunRecord(job_id, "REQUEUED", 0.0, 10.6, "COMPLETED", 0, 0, 10.2)
        elif job_id in self.finish_at_requeue:
            # the script completed an instant before the command arrived: Slurm
            # requeues the finished job all the same, and accounting shows it
            # ... in the very second of the requeue: sacct cannot tell it apart
            job.state, job.placement = "COMPLETED", {}
            ended = RunRecord(job_id, "REQUEUED", 0.0, 10.6, "COMPLETED", 0, 0, 10.2)
            self.kept_alloc.add(job_id)
        elif job_id in self.exit_on_term:
            ended = RunRecord(job_id, "REQUEUED", 0.0, 10.2, "COMPLETED", 0, 0, 10.6)
            if job_id in self.outputs:  # slurmstepd notes the requeue in the job's output
                line = (
                    f"*** JOB {job_id} ON x CANCELLED AT 1970-01-01T00:00:10 DUE TO JOB REQUEUE ***"
                )
                with self.outputs[job_id].open("a") as out:
                    out.write(f"slurmstepd-x: error: {line}\n")
        else:
            ended = RunRecord(job_id, "REQUEUED", 0.0, 10.0, "CANCELLED", 0, 15, 10.0)
        if job.state not in ("RUNNING", "COMPLETED", "FAILED"):
            raise SlurmCommandError(["scontrol", "requeuehold"], 1, "Job is pending")
        job.state, job.held, job.placement = "PENDING", True, {}
        job.restarts += 1
        self.run_log.append(ended)
        self.leaving[job_id] = self.completing_reads

    def list_jobs(self) -> list[SlurmJob]:
        jobs = super().list_jobs()
        out = []
        for job in jobs:
            if job.job_id in self.outputs:
                job = dataclasses.replace(job, stdout_path=str(self.outputs[job.job_id]))
            if job.job_id in self.kept_alloc:
                job = dataclasses.replace(job, alloc_tres="cpu=1,node=1,gres/gpu=4")
            if job.job_id in self.failed_launches and job.state == "FAILED":
                job = dataclasses.replace(job, start_time=500.0, end_time=501.0, reason="None")
            left = self.leaving.get(job.job_id, 0)
            if left > 0:
                self.leaving[job.job_id] = left - 1
                job = dataclasses.replace(job, state="COMPLETING", held=False)
            out.append(job)
        return out

    def release(self, job_id: int) -> None:
        if self.leaving.get(job_id, 0) > 0:
            raise AssertionError(f"job {job_id} released while its old run was completing")
        super().release(job_id)


@pytest.fixture
def racing() -> RacingPort:
    return RacingPort()


def moving_job(config: HopsConfig, port: RacingPort, sessions, clock: FakeClock):  # type: ignore[no-untyped-def]
    """A job on k80 that gains 8x on a100, with the a100s just freed: the next round moves it."""
    foreign = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
    job = port.add_job(HopsTag((4,), 1e7))
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    assert set(port.jobs[job].placement) <= {"slow1", "slow2"}
    a100_pays_8x(sessions, clock, job)
    port.finish(foreign)
    clock.advance(11)  # a new round: running jobs are re-planned
    return tick, job


def test_requeue_that_hits_a_finished_job_never_runs_it_again(config, racing, sessions, clock):  # type: ignore[no-untyped-def]
    """Fault 1: the job ends just as hops requeues it; it is recorded done and cancelled."""
    tick, job = moving_job(config, racing, sessions, clock)
    racing.finish_at_requeue.add(job)
    result = tick.run_once()
    assert [a.kind for a in result.actions] == ["move"]
    assert racing.actions(job)[-2:] == ["requeue_hold", "cancel"]
    assert "release" not in racing.actions(job)[2:]  # only the first start released it
    assert racing.jobs[job].state == "CANCELLED"
    assert result.enacted is not None and result.enacted.finished_early == [str(job)]
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.state == JobState.DONE
        assert "finished before hops requeued it" in row.state_reason
        intents = list(s.scalars(select(IntentRow).where(IntentRow.job_id == str(job))))
        states = {(i.action, i.state) for i in intents}
        assert (IntentAction.CANCEL, IntentState.DONE) in states
        assert (IntentAction.RELEASE, IntentState.ABANDONED) in states
        assert not pending_intents(s)
        # the history no longer claims the move: the job ended where it ran
        history = allocation_history(s, str(job))
        assert [a.reason for a in history[-2:]] == [AllocationReason.KEEP, AllocationReason.END]
        assert {p[0] for p in history[-2].parts or []} <= {"slow1", "slow2"}
    clock.advance(1)
    tick.run_once()  # Slurm now shows it CANCELLED: the ledger keeps it done
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.state == JobState.DONE


def test_a_script_that_exits_0_on_the_requeue_in_the_same_second_is_moved(  # type: ignore[no-untyped-def]
    config, racing, sessions, clock
):
    """The same accounting as a finished run, but Slurm cleared the allocation: stopped."""
    tick, job = moving_job(config, racing, sessions, clock)
    racing.exit_on_term.add(job)
    tick.run_once()
    assert racing.actions(job)[-4:] == ["requeue_hold", "update", "make_eligible", "release"]
    assert racing.jobs[job].state == "RUNNING"


def test_move_releases_only_after_the_old_run_left_its_nodes(config, racing, sessions, clock):  # type: ignore[no-untyped-def]
    """Fault 2: no release while the job is COMPLETING (RacingPort.release asserts it)."""
    tick, job = moving_job(config, racing, sessions, clock)
    racing.completing_reads = 3
    reads_before = racing.reads
    result = tick.run_once()
    assert racing.actions(job)[-4:] == ["requeue_hold", "update", "make_eligible", "release"]
    assert racing.jobs[job].state == "RUNNING"
    assert set(racing.jobs[job].placement) <= {"fast1", "fast2"}
    assert racing.reads - reads_before >= 5  # observe + pre-check + polls until pending
    assert result.enacted is not None and not result.enacted.deferred


def test_a_job_still_completing_waits_for_a_later_tick_and_is_not_planned_twice(  # type: ignore[no-untyped-def]
    config, racing, sessions, clock
):
    config = dataclasses.replace(config, requeue_wait_s=0.0)
    tick, job = moving_job(config, racing, sessions, clock)
    racing.completing_reads = 10_000  # the old run does not leave for a long time
    result = tick.run_once()
    assert result.enacted is not None and [s.job_id for s in result.enacted.deferred] == [str(job)]
    assert racing.actions(job)[-1] == "requeue_hold"
    with sessions.begin() as s:
        waiting = [i.action for i in pending_intents(s)]
    assert waiting == [IntentAction.UPDATE, IntentAction.MAKE_ELIGIBLE, IntentAction.RELEASE]
    clock.advance(1)
    again = tick.run_once()
    assert all(a.job_id != str(job) for a in again.actions)  # not planned a second time
    with sessions.begin() as s:
        assert len(pending_intents(s)) == 3
    racing.leaving[job] = 0  # the old run is gone now
    clock.advance(1)
    tick.run_once()
    assert racing.actions(job)[-3:] == ["update", "make_eligible", "release"]
    assert racing.jobs[job].state == "RUNNING"
    with sessions.begin() as s:
        assert not pending_intents(s)


def test_a_launch_that_fails_at_once_is_requeued_and_placed_again(config, racing, sessions, clock):  # type: ignore[no-untyped-def]
    """A job hops released that Slurm ends FAILED within a second is retried, not failed."""
    job = racing.add_job(HopsTag((1,), 10_000))
    tick = Tick(config, racing, sessions, clock=clock)
    tick.run_once()
    assert racing.jobs[job].state == "RUNNING"
    racing.failed_launches.add(job)
    racing.jobs[job].state, racing.jobs[job].placement = "FAILED", {}
    clock.advance(1)
    result = tick.run_once()  # seen failed at once: the step relaunches it (requeued held)
    assert result.reconcile is not None and result.reconcile.requeued == [str(job)]
    assert [(a.job_id, a.kind) for a in result.actions] == [(str(job), "relaunch")]
    assert racing.actions(job)[-1] == "requeue_hold"
    clock.advance(1)
    tick.run_once()  # and placed again by the next plan
    # the failed run is not taken for a finished one: no cancel, a new start
    assert racing.actions(job)[-4:] == ["requeue_hold", "update", "make_eligible", "release"]
    assert racing.jobs[job].state == "RUNNING"
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.state in (JobState.REQUEUED, JobState.RUNNING)
        requeue = s.scalars(
            select(IntentRow).where(IntentRow.action == IntentAction.REQUEUE_HOLD)
        ).one()
        assert (
            requeue.payload["kind"] == "relaunch" and "launch failed" in requeue.payload["reason"]
        )


def test_a_job_that_keeps_failing_at_launch_fails_after_three_tries(
    config, racing, sessions, clock
):  # type: ignore[no-untyped-def]
    job = racing.add_job(HopsTag((1,), 10_000))
    tick = Tick(config, racing, sessions, clock=clock)
    tick.run_once()
    racing.failed_launches.add(job)
    for _ in range(12):
        if racing.jobs[job].state == "RUNNING":
            racing.jobs[job].state, racing.jobs[job].placement = "FAILED", {}
        clock.advance(1)
        tick.run_once()
    assert racing.actions(job).count("requeue_hold") == 3
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.state == JobState.FAILED


@pytest.mark.parametrize("stopped", [True, False])
def test_an_end_slurmctld_had_not_heard_of_is_told_by_the_job_output(  # type: ignore[no-untyped-def]
    config, racing, sessions, clock, tmp_path, utc, stopped
):
    """Same second, allocation record cleared: slurmstepd's line in the output decides."""
    import os

    tick, job = moving_job(config, racing, sessions, clock)
    tick.enactor.uid_of = lambda user: os.getuid()
    racing.outputs[job] = tmp_path / "job.out"
    racing.outputs[job].write_text("epoch 1 done\n")
    (racing.exit_on_term if stopped else racing.end_unheard).add(job)
    tick.run_once()
    if stopped:
        assert racing.actions(job)[-4:] == ["requeue_hold", "update", "make_eligible", "release"]
    else:
        assert racing.actions(job)[-2:] == ["requeue_hold", "cancel"]
        with sessions.begin() as s:
            row = get_job(s, str(job))
            assert row is not None and row.state == JobState.DONE
            assert "no requeue line from slurmstepd" in row.state_reason


class Killed(Exception):
    """hopsd killed where the fault port strikes (a SIGKILL, for the ledger)."""


class KillAfterIntents:
    """Kills the tick right after its decision's intents are committed, noting what the
    ledger and Slurm held at that instant."""

    def __init__(self, port: RacingPort, sessions, job: int) -> None:  # type: ignore[no-untyped-def]
        self.port, self.sessions, self.job = port, sessions, job
        self.pending: list[IntentAction] = []
        self.made: list[str] = []

    def intents_committed(self) -> None:
        with self.sessions.begin() as s:
            self.pending = [i.action for i in pending_intents(s)]
        self.made = self.port.actions(self.job)
        raise Killed

    def action_taken(self, count: int) -> None:
        return None


def test_a_relaunch_is_the_steps_written_before_slurm_and_taken_once_after_a_kill(  # type: ignore[no-untyped-def]
    config, racing, sessions, clock
):
    """The step returns the relaunch and the tick enacts it: its intent is committed before
    any Slurm call; a daemon killed there and restarted takes it once (resume), never twice."""
    job = racing.add_job(HopsTag((1,), 10_000))
    Tick(config, racing, sessions, clock=clock).run_once()
    racing.failed_launches.add(job)
    racing.jobs[job].state, racing.jobs[job].placement = "FAILED", {}
    before = racing.actions(job)
    clock.advance(1)
    kill = KillAfterIntents(racing, sessions, job)
    with pytest.raises(Killed):
        Tick(config, racing, sessions, clock=clock, faults=kill).run_once()
    assert kill.pending == [IntentAction.REQUEUE_HOLD]
    assert kill.made == before  # nothing of the relaunch asked of Slurm yet
    for _ in range(3):  # restarted daemons
        clock.advance(1)
        Tick(config, racing, sessions, clock=clock).run_once()
    assert racing.actions(job).count("requeue_hold") == 1
    assert racing.actions(job)[-4:] == ["requeue_hold", "update", "make_eligible", "release"]
    assert racing.jobs[job].state == "RUNNING"


def test_a_failed_launch_slurm_made_without_hops_ends_and_is_neither_relaunched_nor_requeued(  # type: ignore[no-untyped-def]
    config, racing, sessions, clock
):
    """Its owner released it and Slurm's launch failed at once: not hops's run to restart
    (the act stage lets it end), and its unplanned run, over already, is not requeued."""
    job = racing.add_job(HopsTag((4,), 1e7), user_hold=True)
    racing.owner_release(job, start_on={"fast1": 4})
    tick = Tick(config, racing, sessions, clock=clock)
    observe_and_reconcile(tick)  # adopted as a run Slurm started without hops
    racing.failed_launches.add(job)
    racing.jobs[job].state, racing.jobs[job].placement = "FAILED", {}
    clock.advance(1)
    tick.run_once()
    assert "requeue_hold" not in racing.actions(job)
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.state == JobState.FAILED
        assert not s.scalars(select(IntentRow).where(IntentRow.job_id == str(job))).all()
