"""The tick against an in-memory Slurm: adoption, starting, moving, ends, resume, shadow."""

from __future__ import annotations

import pytest
from daemon_fakeport import a100_pays_8x
from sqlalchemy import select

from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_history
from hopsd.ledger.intents import pending_intents
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import IntentRow, IntentState, JobState, RoundRow, RunRow
from hopsd.slurm.tag import HopsTag


def make_tick(config, port, sessions, clock, **kw) -> Tick:  # type: ignore[no-untyped-def]
    return Tick(config, port, sessions, clock=clock, **kw)


def state_of(sessions, job_id: int) -> JobState:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        row = get_job(s, str(job_id))
        assert row is not None
        return JobState(row.state)


def test_adopts_held_tagged_job_and_starts_it_on_managed_nodes(config, port, sessions, clock):
    job = port.add_job(HopsTag((1, 2), 10_000))
    tick = make_tick(config, port, sessions, clock)
    result = tick.run_once()
    assert result.reconcile is not None and result.reconcile.adopted == [str(job)]
    assert port.actions(job) == ["update", "release"]
    assert port.jobs[job].state == "RUNNING"
    assert set(port.jobs[job].placement) <= {"slow1", "slow2", "fast1", "fast2"}
    assert port.jobs[job].partition in ("slow", "fast")
    clock.advance(1)
    tick.run_once()
    assert state_of(sessions, job) == JobState.RUNNING
    with sessions.begin() as s:
        assert not pending_intents(s)
        states = {r.state for r in s.scalars(select(IntentRow))}
        assert states == {IntentState.DONE}
        row = get_job(s, str(job))
        assert row is not None and row.estimate_source == "table"


def test_reads_are_batched_two_calls_per_tick(config, port, sessions, clock):
    for _ in range(30):
        port.add_job(HopsTag((1,), 10_000))
    tick = make_tick(config, port, sessions, clock)
    for _ in range(3):
        before = port.reads
        tick.run_once()
        clock.advance(1)
        assert port.reads - before == 2


def test_non_hops_jobs_are_never_touched_and_unplanned_starts_are_requeued(
    config, port, sessions, clock
):
    foreign = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
    # a hops job Slurm runs although hops never placed it (its owner released it)
    unheld = port.add_job(HopsTag((1,), 1000), held=False, running_on={"slow1": 1})
    mine = port.add_job(HopsTag((4,), 10_000))
    tick = make_tick(config, port, sessions, clock)
    result = tick.run_once()
    assert port.actions(foreign) == []
    assert port.actions(unheld)[0] == "requeue_hold"  # then placed like any hops job
    assert result.reconcile is not None and result.reconcile.rejected == []
    # the fast nodes are full of the foreign job: mine must go to the slow ones
    assert set(port.jobs[mine].placement) <= {"slow1", "slow2"}


@pytest.mark.parametrize(
    ("comment", "why"),
    [
        ('hops1:{"d":[1],"n":100,"x":1}', "unknown tag keys"),
        ('hops1:{"d":[2,1],"n":100}', "strictly increasing"),
        ('hops1:{"d":[1],"n":-5}', "outside the allowed range"),
        ("hops1:not json", "not valid JSON"),
        ('hops1:{"d":[9],"n":1000}', "largest configuration"),
        ('hops1:{"d":[1],"n":10,"b":32}', "below one batch"),
        ('hops1:{"d":[64],"n":1000}', "max_demand_gpus"),
    ],
)
def test_invalid_tags_are_reported_and_never_enacted(config, port, sessions, clock, comment, why):
    config = type(config)(**{**config.__dict__, "max_demand_gpus": 32})
    job = port.add_job(None, comment=comment)
    tick = make_tick(config, port, sessions, clock)
    result = tick.run_once()
    assert result.reconcile is not None
    assert len(result.reconcile.rejected) == 1
    assert result.reconcile.rejected[0][0] == job and why in result.reconcile.rejected[0][1]
    assert port.actions(job) == []
    with sessions.begin() as s:
        assert get_job(s, str(job)) is None
    clock.advance(1)
    again = tick.run_once()  # reported once, not on every tick
    assert again.reconcile is not None and again.reconcile.rejected == []


def test_demand_options_beyond_the_cluster_are_dropped_not_refused(config, port, sessions, clock):
    job = port.add_job(HopsTag((2, 8, 16), 10_000))
    make_tick(config, port, sessions, clock).run_once()
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.demands == [2, 8]


def test_end_is_recorded_with_service_and_wait(config, port, sessions, clock):
    job = port.add_job(HopsTag((2,), 10_000))
    other = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4, "slow1": 4})
    blocker = port.add_job(None, held=False, running_on={"slow2": 3})
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()  # adopted, cannot start: only one GPU free
    assert port.actions(job) == []
    clock.advance(5)
    port.finish(other)
    tick.run_once()  # 5 s of waiting charged, then started
    assert port.jobs[job].state == "RUNNING"
    clock.advance(1)
    tick.run_once()  # observed running
    clock.advance(10)
    port.finish(job)
    tick.run_once()
    assert state_of(sessions, job) == JobState.DONE
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None
        assert row.wait_time == pytest.approx(6.0)  # 5 s held + 1 s until seen running
        assert row.service_gpu_s == pytest.approx(20.0)  # 2 GPUs x 10 s
        speed = 4.0 if row.current_gpu_type == "a100" else None
        assert speed is None  # cleared at the end
        reasons = [a.reason.value for a in allocation_history(s, str(job))]
        assert reasons[0] == "start" and reasons[-1] == "end"
    assert blocker in port.jobs


def test_a_run_between_two_ticks_is_charged_as_slurm_states_it(config, port, sessions, clock):
    """A job released by one tick that starts and completes before the next is charged
    its wait until Slurm's start and its service from start to end, not one long wait."""
    job = port.add_job(HopsTag((2,), 10_000))
    other = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4, "slow1": 4})
    port.add_job(None, held=False, running_on={"slow2": 3})
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()  # adopted, cannot start: only one GPU free
    clock.advance(5)
    port.finish(other)
    tick.run_once()  # 5 s of waiting charged, then released
    released_at = clock()
    nodes = dict(port.jobs[job].placement)
    assert sum(nodes.values()) == 2
    port.ran_between_reads(job, nodes, start=released_at + 0.5, end=released_at + 3.0)
    clock.advance(10)
    tick.run_once()
    assert state_of(sessions, job) == JobState.DONE
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None
        assert row.wait_time == pytest.approx(5.5)  # not 15 s: the job ran after 0.5 s
        assert row.service_gpu_s == pytest.approx(5.0)  # 2 GPUs x 2.5 s, none after its end
        # Slurm named the nodes, not its GPUs there: the run is where hops placed it
        (run,) = s.scalars(select(RunRow).where(RunRow.job_id == str(job)))
        assert {str(n): int(g) for n, g in run.parts} == nodes
        assert (run.start_time, run.end_time) == (released_at + 0.5, released_at + 3.0)


def _started(config, port, sessions, clock):  # type: ignore[no-untyped-def]
    """A one-GPU job, seen for two ticks a second apart: started by the first."""
    job = port.add_job(HopsTag((1,), 10_000))
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    clock.advance(1)
    tick.run_once()
    return tick, job


def test_job_that_left_the_queue_takes_its_end_from_accounting(config, port, sessions, clock):
    tick, job = _started(config, port, sessions, clock)
    port.finish(job, "FAILED")
    port.forget(job)
    clock.advance(1)
    result = tick.run_once()
    assert result.reconcile is not None and result.reconcile.ended == [(str(job), "failed")]
    assert state_of(sessions, job) == JobState.FAILED


def test_requeue_by_slurm_is_followed_and_job_restarted(config, port, sessions, clock):
    tick, job = _started(config, port, sessions, clock)
    port.jobs[job].state, port.jobs[job].placement, port.jobs[job].held = "PENDING", {}, True
    port.jobs[job].restarts = 1
    clock.advance(1)
    tick.run_once()  # seen requeued-held: preempted, then placed again with StartTime=now
    assert port.actions(job)[-3:] == ["update", "make_eligible", "release"]
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.state == JobState.RUNNING and row.restarts == 1


def test_plan_round_moves_a_job_to_the_faster_type_when_it_frees(config, port, sessions, clock):
    """Heterogeneity: a job that gains 8x on a100 is moved there once the a100s free up."""
    foreign = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
    job = port.add_job(HopsTag((4,), 1e7))
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    assert set(port.jobs[job].placement) <= {"slow1", "slow2"}
    a100_pays_8x(sessions, clock, job, gpu_counts=(4, 1))
    port.finish(foreign)
    clock.advance(11)  # a new round: running jobs are re-planned
    result = tick.run_once()
    assert result.decision is not None and result.decision.kind == "round"
    assert [a.kind for a in result.actions] == ["move"]
    assert port.actions(job)[-4:] == ["requeue_hold", "update", "make_eligible", "release"]
    assert set(port.jobs[job].placement) <= {"fast1", "fast2"}
    assert port.jobs[job].restarts == 1


def test_crash_between_intents_and_enactment_is_resumed_once(config, port, sessions, clock):
    job = port.add_job(HopsTag((2,), 10_000))
    port.crash_on = ("release", job)
    tick = make_tick(config, port, sessions, clock)
    with pytest.raises(KeyboardInterrupt):
        tick.run_once()
    assert port.actions(job) == ["update"]
    with sessions.begin() as s:
        assert [i.action.value for i in pending_intents(s)] == ["release"]
    clock.advance(2)
    restarted = make_tick(config, port, sessions, clock)  # a fresh daemon
    result = restarted.run_once()
    assert port.actions(job) == ["update", "release"]
    assert port.jobs[job].state == "RUNNING"
    assert result.resumed is not None and len(result.resumed.done) == 1
    assert result.actions == []  # the job is pinned where it was released, not placed twice
    with sessions.begin() as s:
        assert not pending_intents(s)


def test_stale_pending_intents_are_abandoned_and_the_job_replanned(config, port, sessions, clock):
    job = port.add_job(HopsTag((2,), 10_000))
    port.crash_on = ("update", job)
    with pytest.raises(KeyboardInterrupt):
        make_tick(config, port, sessions, clock).run_once()
    clock.advance(60)  # far beyond a round
    result = make_tick(config, port, sessions, clock).run_once()
    assert result.resumed is not None
    assert {s.action.value for s, _ in result.resumed.abandoned} == {"update", "release"}
    assert port.actions(job) == ["update", "release"]  # placed afresh by the new decision
    assert port.jobs[job].state == "RUNNING"


def test_refused_step_abandons_the_rest_of_the_chain(config, port, sessions, clock):
    job = port.add_job(HopsTag((1,), 10_000))
    port.refuse.add(("update", job))
    result = make_tick(config, port, sessions, clock).run_once()
    assert result.enacted is not None
    assert [s.action.value for s, _ in result.enacted.failed] == ["update"]
    assert [s.action.value for s, _ in result.enacted.abandoned] == ["release"]
    assert port.actions(job) == ["update"]
    assert port.jobs[job].held


def test_shadow_mode_decides_and_records_but_enacts_nothing(config, port, sessions, clock):
    job = port.add_job(HopsTag((1,), 10_000))
    tick = make_tick(config, port, sessions, clock, shadow=True)
    result = tick.run_once()
    assert [a.job_id for a in result.actions] == [] and port.calls == []
    assert result.decision is not None and result.decision.plan.start
    with sessions.begin() as s:
        rounds = list(s.scalars(select(RoundRow)))
        assert len(rounds) == 1 and rounds[0].shadow
        assert str(job) in rounds[0].note
        assert not list(s.scalars(select(IntentRow)))


def _running_on_slow_with_fast_free(config, port, sessions, clock, samples_done: float):  # type: ignore[no-untyped-def]
    foreign = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
    job = port.add_job(HopsTag((4,), 1e5))
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    clock.advance(1)
    tick.run_once()
    a100_pays_8x(sessions, clock, job)
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None
        row.samples_done = samples_done
    port.finish(foreign)
    clock.advance(11)
    return tick, job


def test_a_job_about_to_finish_is_not_requeued(config, port, sessions, clock):
    # 4 GPUs x 10 samples/s = 40/s; 40 samples left = 1 s, below the restart guard
    tick, job = _running_on_slow_with_fast_free(config, port, sessions, clock, 1e5 - 40)
    result = tick.run_once()
    assert result.actions == []
    assert "requeue_hold" not in port.actions(job)


def test_a_job_far_from_its_end_is_moved(config, port, sessions, clock):
    tick, _ = _running_on_slow_with_fast_free(config, port, sessions, clock, 0.0)
    result = tick.run_once()
    assert [a.kind for a in result.actions] == ["move"]


def test_requeue_of_a_job_that_ended_meanwhile_is_abandoned(config, port, sessions, clock):
    from hopsd.daemon.enact import Enactor, Step
    from hopsd.ledger.intents import IntentRequest, record_intents
    from hopsd.ledger.models import IntentAction

    job = port.add_job(HopsTag((1,), 1000))
    make_tick(config, port, sessions, clock).run_once()
    assert port.jobs[job].state == "RUNNING"
    with sessions.begin() as s:
        payload = {"slurm_id": job, "kind": "preempt", "restarts": 0}
        rows = record_intents(
            s, [IntentRequest(str(job), IntentAction.REQUEUE_HOLD, payload)], None, clock()
        )
        steps = [Step.of(r) for r in rows]
    port.finish(job)  # it ends after the decision, before the requeue
    enactor = Enactor(
        port, sessions, clock, lambda: {j.job_id for j in port.list_jobs() if j.running}
    )
    report = enactor.run(steps)
    assert "requeue_hold" not in port.actions(job) and len(report.abandoned) == 1


def test_each_tick_records_the_cores_latency_ratio_and_themis_rho(config, port, sessions, clock):
    """hops fairness shows these figures: they are the core's, computed by hopsd."""
    blocker = port.add_job(None, held=False, running_on={n.name: n.gpus for n in port.nodes})
    job = port.add_job(HopsTag((2,), 10_000))
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    clock.advance(100)
    tick.run_once()  # still waiting: the whole cluster is taken
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.state == JobState.QUEUED
        assert row.latency_ratio is not None and row.latency_ratio > 0
        assert row.ftf_rho is not None and row.ftf_rho > 1.0  # worse off than on its own share
        assert row.plan_reason == "waiting: 0 GPUs free, needs at least 2"  # the step's reason
    assert blocker in port.jobs


def test_a_refused_job_is_kept_with_its_reason_until_slurm_forgets_it(
    config, port, sessions, clock
):
    from hopsd.ledger.models import RefusalRow

    tiny = port.add_job(HopsTag((1,), 10.0, batch_size=32))  # fewer samples than one batch
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    with sessions.begin() as s:
        rows = list(s.scalars(select(RefusalRow)))
        assert [(r.slurm_job_id, r.user) for r in rows] == [(tiny, "alice")]
        assert "below one batch" in rows[0].reason
        assert get_job(s, str(tiny)) is None  # refused: never adopted
    clock.advance(1)
    tick.run_once()  # still in Slurm: the refusal stays, once
    with sessions.begin() as s:
        assert len(list(s.scalars(select(RefusalRow)))) == 1
    port.jobs[tiny].state = "CANCELLED"  # the owner gives up; Slurm forgets it
    del port.jobs[tiny]
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        assert list(s.scalars(select(RefusalRow))) == []


def test_a_refusal_is_logged_once_across_restarts(config, port, sessions, clock, caplog):  # type: ignore[no-untyped-def]
    port.add_job(HopsTag((1,), 10.0, batch_size=32))  # fewer samples than one batch
    with caplog.at_level("WARNING", logger="hopsd.daemon.reconcile"):
        make_tick(config, port, sessions, clock).run_once()
        clock.advance(1)
        make_tick(config, port, sessions, clock).run_once()  # hopsd restarted
    assert sum("event=refuse " in r.getMessage() for r in caplog.records) == 1


def test_a_refusal_lost_with_a_failed_tick_is_recorded_by_the_next(  # type: ignore[no-untyped-def]
    config, port, sessions, clock, monkeypatch
):
    from hopsd.ledger.models import RefusalRow

    tiny = port.add_job(HopsTag((1,), 10.0, batch_size=32))
    tick = make_tick(config, port, sessions, clock)
    sensing = tick.reconciler.sensing
    real_clean = sensing.clean

    def fail_once(*args, **kwargs):  # type: ignore[no-untyped-def]
        monkeypatch.setattr(sensing, "clean", real_clean)
        raise RuntimeError("ledger write failed")

    monkeypatch.setattr(sensing, "clean", fail_once)
    with pytest.raises(RuntimeError, match="ledger write failed"):
        tick.run_once()
    with sessions.begin() as s:
        assert list(s.scalars(select(RefusalRow))) == []  # rolled back with the tick
    clock.advance(1)
    tick.run_once()
    with sessions.begin() as s:
        assert [r.slurm_job_id for r in s.scalars(select(RefusalRow))] == [tiny]
