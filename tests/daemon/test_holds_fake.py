"""Jobs stay held until hops places them (in-memory Slurm with user and admin holds).

``hops submit`` holds a job with ``sbatch --hold``: a hold its owner may
release, so Slurm would start it with no hops decision. hopsd makes the hold
its own (an admin hold) when it adopts the job; a job its owner released
before that is held again, or requeued held when Slurm already started it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from daemon_fakeport import FakeClock, FakePort
from spool_tick import row_of
from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.daemon.holds import UNPLANNED
from hopsd.daemon.tick import Tick
from hopsd.ledger import jobs as ledger_jobs
from hopsd.ledger.models import IntentAction, IntentRow
from hopsd.slurm.errors import SlurmCommandError, SlurmUnavailableError
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((4,), 1e7)

NewTick = Callable[..., Tick]


@pytest.fixture
def new_tick(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> NewTick:
    """Makes the test's tick once it has set Slurm up: over its config (unless given another),
    fake Slurm, ledger and clock, with Tick's other options as given (``shadow``)."""

    def make(config: HopsConfig = config, **options: Any) -> Tick:
        return Tick(config, port, sessions, clock=clock, **options)

    return make


def test_the_owners_hold_becomes_hops_own_at_adoption(
    port: FakePort, clock: FakeClock, new_tick: NewTick
) -> None:
    blocker = port.add_job(None, held=False, running_on={n.name: 4 for n in port.nodes})
    job = port.add_job(TAG, user_hold=True)
    port.owner_release(job)  # before hops: the owner may release a hold of their own
    port.jobs[job].held = port.jobs[job].user_hold = True  # held again (sbatch --hold)
    tick = new_tick()
    tick.run_once()
    assert port.actions(job) == ["hold"]  # no GPU free: hops only takes the hold over
    with pytest.raises(SlurmCommandError, match="denied"):
        port.owner_release(job)
    assert port.jobs[job].held and port.jobs[job].state == "PENDING"
    for _ in range(3):  # asked once: later ticks leave hops's own hold alone
        clock.advance(1)
        tick.run_once()
    assert port.actions(job) == ["hold"]
    port.finish(blocker)
    clock.advance(11)
    tick.run_once()  # hops places and releases it itself
    assert port.jobs[job].state == "RUNNING" and port.actions(job)[-1] == "release"


def test_a_job_released_by_its_owner_before_adoption_is_held_again(
    port: FakePort, sessions: sessionmaker[Session], new_tick: NewTick
) -> None:
    port.add_job(None, held=False, running_on={n.name: 4 for n in port.nodes})
    job = port.add_job(TAG, user_hold=True)
    port.owner_release(job)  # released, pending: nothing free to start on yet
    tick = new_tick()
    tick.run_once()
    assert port.actions(job) == ["hold"] and port.jobs[job].held
    assert not port.jobs[job].user_hold
    assert row_of(sessions, job).state == "queued"


def test_a_job_slurm_started_before_adoption_is_requeued_held_with_the_reason(
    port: FakePort, sessions: sessionmaker[Session], new_tick: NewTick
) -> None:
    job = port.add_job(TAG, user_hold=True)
    port.owner_release(job, start_on={"fast1": 4})  # Slurm starts it, no hops decision
    tick = new_tick()
    tick.run_once()
    assert port.actions(job)[0] == "requeue_hold"
    assert port.jobs[job].restarts == 1
    # requeued within the tick (hopsd follows its own requeue at once), and why
    requeued = row_of(sessions, job)
    assert requeued.state == "preempted" and requeued.state_reason == UNPLANNED
    assert requeued.first_start_time is not None  # the run it had
    with pytest.raises(SlurmCommandError, match="denied"):
        port.owner_release(job)  # the requeue's hold is hops's own


def test_with_a_grace_an_unplanned_start_whose_probe_never_reported_is_requeued_at_once(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], new_tick: NewTick
) -> None:
    """The notice is the act stage's to give (hopsd.core.act): a job that never reported
    cannot checkpoint on it, and a batch script that does not catch the signal dies of it."""
    graced = dataclasses.replace(config, checkpoint_grace_s=30.0)
    job = port.add_job(TAG, user_hold=True)
    port.owner_release(job, start_on={"fast1": 4})
    new_tick(graced).run_once()
    assert port.actions(job)[0] == "requeue_hold" and "signal" not in port.actions(job)
    row = row_of(sessions, job)
    assert row.state == "preempted" and row.state_reason == UNPLANNED


def test_a_shadow_daemon_takes_no_hold(port: FakePort, new_tick: NewTick) -> None:
    job = port.add_job(TAG, user_hold=True)
    started = port.add_job(TAG, user_hold=True)
    port.owner_release(started, start_on={"fast1": 4})
    new_tick(shadow=True).run_once()
    assert port.actions(job) == [] and port.actions(started) == []


def _hold_intents(sessions: sessionmaker[Session]) -> dict[str, tuple[str, str]]:
    with sessions() as s:
        rows = s.scalars(select(IntentRow).where(IntentRow.action == IntentAction.HOLD))
        return {str(r.job_id): (str(r.state), r.error or "") for r in rows}


def _queue_behind_a_full_cluster(port: FakePort, n: int) -> list[int]:
    port.add_job(None, held=False, running_on={node.name: 4 for node in port.nodes})
    return [port.add_job(TAG, user_hold=True) for _ in range(n)]


def test_a_queue_adopted_at_once_is_held_in_one_batched_call(
    port: FakePort, sessions: sessionmaker[Session], new_tick: NewTick
) -> None:
    jobs = _queue_behind_a_full_cluster(port, 5)
    port.refuse.add(("hold", jobs[2]))
    new_tick().run_once()
    assert [sorted(batch) for batch in port.hold_batches] == [sorted(jobs)]
    intents = _hold_intents(sessions)
    assert intents[str(jobs[2])][0] == "failed" and "refused (fake)" in intents[str(jobs[2])][1]
    for job in (*jobs[:2], *jobs[3:]):
        assert intents[str(job)] == ("done", "")
        assert port.jobs[job].held and not port.jobs[job].user_hold
    assert port.jobs[jobs[2]].user_hold  # the refused one keeps its owner's hold


def test_holds_cut_off_by_an_unreachable_slurm_are_taken_once_on_the_next_tick(
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
    new_tick: NewTick,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs = _queue_behind_a_full_cluster(port, 3)
    tick = new_tick()
    with monkeypatch.context() as patch:

        def away(job_ids: object) -> dict[int, str]:
            raise SlurmUnavailableError("slurmctld does not answer (fake)")

        patch.setattr(port, "hold_many", away)
        with pytest.raises(SlurmUnavailableError):
            tick.run_once()
    assert {state for state, _ in _hold_intents(sessions).values()} == {"pending"}
    clock.advance(1)
    tick.run_once()  # resumes the recorded holds, in one call
    assert [sorted(batch) for batch in port.hold_batches] == [sorted(jobs)]
    assert {state for state, _ in _hold_intents(sessions).values()} == {"done"}
    assert all(port.actions(job) == ["hold"] for job in jobs)


def test_a_queue_adopted_at_once_is_written_in_one_insert(
    port: FakePort, sessions: sessionmaker[Session], new_tick: NewTick
) -> None:
    jobs = _queue_behind_a_full_cluster(port, 5)
    inserts: list[int] = []

    def seen(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("INSERT INTO JOBS"):
            inserts.append(len(parameters) if executemany else 1)

    engine = sessions.kw["bind"]
    event.listen(engine, "before_cursor_execute", seen)
    try:
        result = new_tick().run_once()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert result.reconcile is not None and len(result.reconcile.adopted) == len(jobs)
    assert inserts == [len(jobs)]  # one statement over the batch, not one per job
    for job in jobs:
        assert row_of(sessions, job).id == str(job)


def test_a_job_whose_adoption_fails_costs_only_itself_in_a_batch(
    port: FakePort,
    sessions: sessionmaker[Session],
    new_tick: NewTick,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Jobs are adopted many under one savepoint; one failure redoes them one by one."""
    jobs = _queue_behind_a_full_cluster(port, 4)
    real_validate = ledger_jobs._validate

    def broken_for_one(spec):  # type: ignore[no-untyped-def]
        if spec.slurm_job_id == jobs[1]:
            raise RuntimeError("a bug triggered by this job's data")
        return real_validate(spec)

    # the batch's one INSERT and each job's own both check the job's data there
    monkeypatch.setattr(ledger_jobs, "_validate", broken_for_one)
    result = new_tick().run_once()
    assert result.reconcile is not None
    assert sorted(result.reconcile.adopted) == sorted(str(j) for j in jobs if j != jobs[1])
    intents = _hold_intents(sessions)
    assert sorted(intents) == sorted(str(j) for j in jobs if j != jobs[1])
    assert port.actions(jobs[1]) == [] and port.jobs[jobs[1]].user_hold
    for job in (jobs[0], *jobs[2:]):
        assert row_of(sessions, job).id == str(job)  # its own id, no suffix from the retry


class Died(Exception):
    """Stands for a SIGKILL: nothing after it runs, the open transaction rolls back."""


def _die_in_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill the next tick after reconcile committed, before the step wrote any intent."""

    def died(*args: object) -> None:
        raise Died

    monkeypatch.setattr("hopsd.daemon.tick.pending_jobs", died)


@pytest.mark.parametrize("released_by_owner", [False, True])
def test_a_daemon_killed_between_adoption_and_the_steps_hold_holds_the_job_when_restarted(
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
    new_tick: NewTick,
    monkeypatch: pytest.MonkeyPatch,
    released_by_owner: bool,
) -> None:
    """The hold is judged each tick from Slurm's state and the ledger's intents, not from a
    memory of the adoption: the adoption is committed, the hold was never written."""
    (job,) = _queue_behind_a_full_cluster(port, 1)
    if released_by_owner:
        port.owner_release(job)
    with monkeypatch.context() as patch:
        _die_in_the_step(patch)
        with pytest.raises(Died):
            new_tick().run_once()
    assert row_of(sessions, job).state == "queued" and port.actions(job) == []
    assert _hold_intents(sessions) == {}
    clock.advance(1)
    new_tick().run_once()  # a new daemon: it asked for nothing yet
    assert port.actions(job) == ["hold"]
    assert port.jobs[job].held and not port.jobs[job].user_hold
    assert _hold_intents(sessions) == {str(job): ("done", "")}


def test_a_restarted_daemon_leaves_a_job_it_released_alone_while_slurm_launches_it(
    port: FakePort, sessions: sessionmaker[Session], clock: FakeClock, new_tick: NewTick
) -> None:
    """Released by hops, pending and not held until Slurm launches it: not the owner's
    release, so no hold (a hold there would strand the start hops decided)."""
    job = port.add_job(TAG, user_hold=True)
    new_tick().run_once()
    assert port.actions(job)[-1] == "release"
    waiting = port.jobs[job]
    waiting.state, waiting.placement = "PENDING", {}  # Slurm has not launched it yet
    for _ in range(2):
        clock.advance(1)
        new_tick().run_once()  # each a restarted daemon
    assert "hold" not in port.actions(job)[port.actions(job).index("release") :]
    assert not port.jobs[job].held
