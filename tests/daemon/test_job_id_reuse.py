"""A fresh cluster reuses Slurm job ids: old ledger rows are retired, the new job adopted."""

from __future__ import annotations

import logging

import pytest
from daemon_fakeport import FakePort, small_cluster
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from hopsd.daemon.adoption import REUSED, reuse_reason
from hopsd.daemon.tick import Tick
from hopsd.daemon.views import ObservedJob
from hopsd.ledger.intents import IntentRequest, pending_intents, record_intents
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import IntentAction, JobRow, JobState
from hopsd.ledger.unit import Unit
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((1,), 1e6)


def rows_by_id(sessions) -> dict[str, tuple[int | None, JobState, str]]:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        return {
            r.id: (r.slurm_job_id, JobState(r.state), r.state_reason)
            for r in s.scalars(select(JobRow))
        }


def old_cluster_job(config, sessions, clock, *, finish: bool) -> int:  # type: ignore[no-untyped-def]
    """Job 101 of alice, adopted and started on a first cluster (and finished if asked)."""
    port = FakePort(small_cluster())
    job = port.add_job(TAG, user="alice")
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"
    if finish:
        port.finish(job)
        clock.advance(1)
        tick.run_once()
    return job


def test_reuse_reason_by_hand() -> None:
    row = JobRow(user="alice", submit_time=100.0, restarts=0)
    same = ObservedJob(7, "alice", "a", "PENDING", submit_time=100.6)
    assert reuse_reason(row, same) == ""
    assert "owner 'bob'" in reuse_reason(row, ObservedJob(7, "bob", "a", "PENDING", 100.6))
    later = ObservedJob(7, "alice", "a", "PENDING", submit_time=160.0)
    assert "submitted at 160" in reuse_reason(row, later)
    # Slurm resets the submit time on a requeue: a restarted job is the same job
    requeued = ObservedJob(7, "alice", "a", "PENDING", submit_time=160.0, restarts=1)
    assert reuse_reason(row, requeued) == ""
    row.restarts = 3
    assert "restart count 1" in reuse_reason(row, requeued)  # counts never go down


def test_a_finished_row_is_retired_and_the_new_job_adopted(config, sessions, clock, caplog):
    job = old_cluster_job(config, sessions, clock, finish=True)
    assert rows_by_id(sessions)[str(job)][1] == JobState.DONE
    clock.advance(600)
    fresh = FakePort(small_cluster())  # slurmctld -c: ids start over
    new = fresh.add_job(TAG, user="bob", job_id=job, submit_time=clock())
    tick = Tick(config, fresh, sessions, clock=clock)
    with caplog.at_level(logging.WARNING, logger="hopsd.reconcile"):
        result = tick.run_once()
    clock.advance(1)
    tick.run_once()  # the start is seen
    assert new == job and "event=slurm-id-reused" in caplog.text and "owner 'bob'" in caplog.text
    rows = rows_by_id(sessions)
    assert rows[str(job)] == (None, JobState.DONE, f"slurm COMPLETED; {REUSED}")
    assert rows[f"{job}-2"][:2] == (job, JobState.RUNNING)
    assert result.reconcile is not None and result.reconcile.retired == [str(job)]
    assert fresh.jobs[job].state == "RUNNING"
    with sessions.begin() as s:
        adopted = get_job(s, f"{job}-2")
        assert adopted is not None and adopted.user == "bob"


def test_an_unfinished_row_is_ended_and_its_intents_abandoned(config, sessions, clock):
    job = old_cluster_job(config, sessions, clock, finish=False)
    with sessions.begin() as s:  # an intent the old daemon never carried out
        record_intents(
            s, [IntentRequest(str(job), IntentAction.RELEASE, {"slurm_id": job})], None, 1
        )
    clock.advance(50)
    fresh = FakePort(small_cluster())
    fresh.add_job(TAG, user="alice", job_id=job, submit_time=clock())  # same owner, new job
    tick = Tick(config, fresh, sessions, clock=clock)
    tick.run_once()
    clock.advance(1)
    tick.run_once()
    rows = rows_by_id(sessions)
    assert rows[str(job)] == (None, JobState.FAILED, REUSED)
    assert rows[f"{job}-2"][:2] == (job, JobState.RUNNING)
    with sessions.begin() as s:
        assert pending_intents(s, str(job)) == []
    assert fresh.actions(job) == ["update", "release"]  # started as the new job it is


def test_a_requeued_job_with_a_new_submit_time_is_not_mistaken(config, port, sessions, clock):
    job = port.add_job(TAG, user="alice")
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    port.requeue_hold(job)  # as Slurm does, the requeue resets the submit time
    port.jobs[job].submit_time += 300.0
    clock.advance(1)
    result = tick.run_once()
    assert result.reconcile is not None and result.reconcile.retired == []
    assert list(rows_by_id(sessions)) == [str(job)]
    assert rows_by_id(sessions)[str(job)][0] == job


def test_retiring_and_adopting_share_one_transaction(config, sessions, clock, monkeypatch):
    job = old_cluster_job(config, sessions, clock, finish=True)
    fresh = FakePort(small_cluster())
    fresh.add_job(TAG, user="bob", job_id=job, submit_time=clock() + 60)

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("INSERT INTO jobs", {}, Exception("database gone"))

    monkeypatch.setattr(Unit, "add_job", broken)
    with pytest.raises(OperationalError):
        Tick(config, fresh, sessions, clock=clock).run_once()
    assert rows_by_id(sessions) == {str(job): (job, JobState.DONE, "slurm COMPLETED")}


def test_a_failed_adoption_keeps_the_old_row_and_only_skips_that_job(
    config, sessions, clock, monkeypatch
):
    """Any other failure while adopting is the job's alone: its retirement is undone too."""
    job = old_cluster_job(config, sessions, clock, finish=True)
    fresh = FakePort(small_cluster())
    fresh.add_job(TAG, user="bob", job_id=job, submit_time=clock() + 60)
    other = fresh.add_job(TAG, user="carol")
    real_add_job = Unit.add_job

    def broken_for_bob(unit, spec, now, **kwargs):  # type: ignore[no-untyped-def]
        if spec.user == "bob":
            raise RuntimeError("a bug triggered by this job's data")
        return real_add_job(unit, spec, now, **kwargs)

    monkeypatch.setattr(Unit, "add_job", broken_for_bob)
    Tick(config, fresh, sessions, clock=clock).run_once()  # does not raise
    rows = rows_by_id(sessions)
    assert rows[str(job)] == (job, JobState.DONE, "slurm COMPLETED")
    assert rows[str(other)][:2] == (other, JobState.QUEUED)  # adopted, and
    assert fresh.actions(other) == ["update", "release"]  # started in the same tick
