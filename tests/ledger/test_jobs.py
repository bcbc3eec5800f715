"""Jobs: adoption, the state machine, per-tick progress and the planner's view."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Configuration
from hopsd.ledger.errors import DuplicateJobError, IllegalTransitionError, UnknownJobError
from hopsd.ledger.jobs import (
    ACTIVE_STATES,
    LEGAL_TRANSITIONS,
    TERMINAL_STATES,
    JobProgress,
    JobSpec,
    active_jobs,
    add_job,
    apply_progress,
    finished_latency_ratios,
    is_legal,
    job_by_slurm_id,
    jobs_in_states,
    record_of,
    require_job,
    set_current_config,
    to_core_job,
    transition,
)
from hopsd.ledger.models import JobRow, JobState
from hopsd.ledger.records import JobUpdate
from hopsd.ledger.unit import Unit

S = JobState

# The spec's lifecycle, written out independently of the module's table.
EXPECTED_LEGAL = {
    (S.SUBMITTED, S.PROFILING), (S.SUBMITTED, S.QUEUED), (S.PROFILING, S.QUEUED),
    (S.PROFILING, S.RUNNING), (S.QUEUED, S.PROFILING), (S.QUEUED, S.RUNNING),
    (S.RUNNING, S.PREEMPTED), (S.RUNNING, S.REQUEUED), (S.RUNNING, S.DONE),
    (S.PREEMPTED, S.QUEUED), (S.PREEMPTED, S.REQUEUED), (S.PREEMPTED, S.RUNNING),
    (S.REQUEUED, S.QUEUED), (S.REQUEUED, S.PREEMPTED), (S.REQUEUED, S.RUNNING),
    # a requeue that hit a run which had just finished: the job is done after all
    (S.PREEMPTED, S.DONE), (S.REQUEUED, S.DONE),
} | {(a, b) for a in ACTIVE_STATES for b in (S.FAILED, S.CANCELLED)}  # fmt: skip


def _row(state: JobState) -> JobRow:
    return JobRow(id="x", state=state, first_start_time=None, restarts=0, end_time=None)


@pytest.mark.parametrize(("current", "requested"), list(itertools.product(S, S)))
def test_transition_table(current: JobState, requested: JobState) -> None:
    row = _row(current)
    if current == requested:
        assert transition(row, requested, now=5.0) is False
    elif (current, requested) in EXPECTED_LEGAL:
        assert is_legal(current, requested)
        assert transition(row, requested, now=5.0) is True
        assert row.state is requested and row.state_changed_at == 5.0
    else:
        assert not is_legal(current, requested)
        with pytest.raises(IllegalTransitionError) as err:
            transition(row, requested, now=5.0)
        assert f"{current.value} -> {requested.value}" in str(err.value)
        assert row.state is current  # unchanged


def test_terminal_states_have_no_exit() -> None:
    assert all(not LEGAL_TRANSITIONS[t] for t in TERMINAL_STATES)


def test_transition_side_effects_record_start_restarts_and_end() -> None:
    row = _row(S.QUEUED)
    transition(row, S.RUNNING, now=100.0)
    assert row.first_start_time == 100.0 and row.restarts == 0
    transition(row, S.PREEMPTED, now=200.0, reason="yield to higher LR")
    assert row.state_reason == "yield to higher LR"
    transition(row, S.RUNNING, now=300.0)
    assert row.first_start_time == 100.0 and row.restarts == 1
    row.current_gpu_type, row.current_parts = "a100", [["n1", 1]]
    transition(row, S.DONE, now=400.0)
    assert row.end_time == 400.0
    assert row.current_parts is None


def test_add_job_round_trips_and_rejects_duplicates(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    with Sessions.begin() as s:
        add_job(s, make_spec("j1", slurm_job_id=77, lr_by_demand={1: 0.1, 2: 0.14}), now=9.0)
    with Sessions() as s:
        row = require_job(s, "j1")
        assert row.demands == [1, 2, 4] and row.state is S.SUBMITTED
        assert row.lr_by_demand == {"1": 0.1, "2": 0.14}
        assert row.submit_time == 1000.0 and row.updated_at == 9.0
        found = job_by_slurm_id(s, 77)
        assert found is not None and found.id == "j1"
    with pytest.raises(DuplicateJobError), Sessions.begin() as s:
        add_job(s, make_spec("j1"), now=10.0)


@pytest.mark.parametrize(
    "bad",
    [{"demands": ()}, {"demands": (4, 2)}, {"total_samples": 0.0}, {"batch_size": 0}],
)
def test_add_job_validates_with_core_rules(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec], bad: dict[str, object]
) -> None:
    with pytest.raises(InvalidInputError), Sessions.begin() as s:
        add_job(s, make_spec("bad", **bad), now=1.0)
    with Sessions() as s:
        assert active_jobs(s) == []


def test_apply_progress_updates_many_jobs_and_rejects_unknown(
    Sessions: sessionmaker[Session], add_jobs: Callable[..., list[JobRow]]
) -> None:
    with Sessions.begin() as s:
        add_jobs(s, *(f"j{i}" for i in range(5)))
    with Sessions.begin() as s:
        updates = [
            JobProgress(f"j{i}", wait_time=10.0 * i, samples_done=100.0 * i, estimate_source="type")
            for i in range(5)
        ]
        assert apply_progress(s, updates, now=50.0) == 5
        apply_progress(s, [JobProgress("j0", service_gpu_s=7.0)], now=51.0)
    with Sessions() as s:
        rows = {r.id: r for r in active_jobs(s)}
        assert [rows[f"j{i}"].wait_time for i in range(5)] == [0.0, 10.0, 20.0, 30.0, 40.0]
        assert rows["j3"].samples_done == 300.0 and rows["j3"].estimate_source == "type"
        assert rows["j0"].service_gpu_s == 7.0 and rows["j0"].wait_time == 0.0
        assert rows["j0"].updated_at == 51.0
    with pytest.raises(UnknownJobError), Sessions.begin() as s:
        apply_progress(s, [JobProgress("nope", wait_time=1.0)], now=60.0)


def _run_wait_old(
    s: Session, make_spec: Callable[..., JobSpec], config: Configuration
) -> tuple[JobRow, JobRow]:
    """Three jobs: "run" running on ``config``, "wait" submitted, "old" done; the first
    and the last."""
    running = add_job(s, make_spec("run", submit_time=1.0), now=1.0)
    add_job(s, make_spec("wait", submit_time=2.0), now=1.0)
    finished = add_job(s, make_spec("old", submit_time=0.5), now=1.0)
    transition(running, S.QUEUED, now=2.0)
    transition(running, S.RUNNING, now=3.0)
    set_current_config(running, config)
    for state in (S.QUEUED, S.RUNNING, S.DONE):
        transition(finished, state, now=4.0)
    return running, finished


def test_state_queries_and_core_view(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    config = Configuration.of("rtx3090", {"n1": 2, "n2": 2})
    with Sessions.begin() as s:
        running, finished = _run_wait_old(s, make_spec, config)
        running.service_norm, running.wait_time = 12.0, 2.0
        finished.latency_ratio = 0.75
    with Sessions() as s:
        assert [r.id for r in active_jobs(s)] == ["run", "wait"]
        assert [r.id for r in jobs_in_states(s, [S.DONE])] == ["old"]
        core = to_core_job(require_job(s, "run"))
        assert core.current == config
        assert core.demands == (1, 2, 4) and core.attained_service == 12.0
        assert core.wait_time == 2.0 and core.params == 25.6e6
        assert to_core_job(require_job(s, "wait")).current is None
        assert finished_latency_ratios(s, since=4.0) == [0.75]
        assert finished_latency_ratios(s, since=4.5) == []


def test_apply_progress_reuses_rows_already_loaded_in_the_session(
    Sessions: sessionmaker[Session], add_jobs: Callable[..., list[JobRow]]
) -> None:
    with Sessions.begin() as s:
        add_jobs(s, "a", "b")
    with Sessions.begin() as s:
        loaded = {r.id: r for r in active_jobs(s) if r.id == "a"}  # "a" cached, "b" not
        apply_progress(s, [JobProgress("a", wait_time=5.0), JobProgress("b", wait_time=6.0)], 2.0)
        assert loaded["a"].wait_time == 5.0  # the very object the caller holds
    with Sessions() as s:
        assert [(r.id, r.wait_time) for r in active_jobs(s)] == [("a", 5.0), ("b", 6.0)]


def test_write_updates_writes_at_once_and_keeps_held_rows_in_step(
    Sessions: sessionmaker[Session], add_jobs: Callable[..., list[JobRow]]
) -> None:
    with Sessions.begin() as s:
        add_jobs(s, "a", "b", "c")
    with Sessions.begin() as s:
        unit = Unit(s)
        held = unit.jobs(["a"])  # "a" held by the unit, "b" and "c" never read
        assert held["a"].wait_time == 0.0
        unit.update_job(JobUpdate("a", state_reason="pending change"))  # not yet flushed
        unit.write_updates(
            [
                JobUpdate("a", wait_time=5.0, updated_at=9.0),
                JobUpdate("b", latency_ratio=1.5),
                JobUpdate("nope", wait_time=1.0),  # not in the ledger: skipped
                JobUpdate("c"),  # sets nothing
            ]
        )
        unit.write_values("plan_reason", {"a": "waits", "c": None, "b": "next"})
        # the held row reads as written, and its own pending change still stands
        again = unit.refresh(held["a"])
        assert (again.wait_time, again.updated_at, again.plan_reason) == (5.0, 9.0, "waits")
        assert again.state_reason == "pending change"
        with pytest.raises(ValueError):
            unit.write_values("id", {"a": "b"})
    with Sessions() as s:
        rows = {r.id: r for r in active_jobs(s)}
        assert (rows["a"].wait_time, rows["a"].updated_at) == (5.0, 9.0)
        assert rows["a"].state_reason == "pending change" and rows["a"].plan_reason == "waits"
        assert rows["b"].latency_ratio == 1.5 and rows["b"].plan_reason == "next"
        assert rows["c"].plan_reason == "" and rows["c"].wait_time == 0.0
        assert "nope" not in rows


def test_a_change_after_a_written_value_is_flushed_over_it(
    Sessions: sessionmaker[Session], add_jobs: Callable[..., list[JobRow]]
) -> None:
    with Sessions.begin() as s:
        add_jobs(s, "a")
    with Sessions.begin() as s:
        unit = Unit(s)
        unit.jobs(["a"])
        unit.update_job(JobUpdate("a", latency_ratio=1.0))  # pending, then overwritten
        unit.write_values("latency_ratio", {"a": 2.0})
        unit.update_job(JobUpdate("a", wait_time=3.0))
    with Sessions() as s:
        row = active_jobs(s)[0]
        assert (row.latency_ratio, row.wait_time) == (2.0, 3.0)
    with Sessions.begin() as s:
        unit = Unit(s)
        unit.jobs(["a"])
        unit.write_values("latency_ratio", {"a": 4.0})
        unit.update_job(JobUpdate("a", latency_ratio=5.0))  # the later change wins
    with Sessions() as s:
        assert active_jobs(s)[0].latency_ratio == 5.0


def test_active_records_read_what_the_rows_say_changes_not_yet_flushed_included(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    config = Configuration.of("rtx3090", {"n1": 2, "n2": 2})
    with Sessions.begin() as s:
        _run_wait_old(s, make_spec, config)
    with Sessions.begin() as s:
        unit = Unit(s)
        unit.update_job(JobUpdate("wait", wait_time=7.5))  # pending in the session
        read = unit.active_records()
        assert [r.id for r in read] == ["run", "wait"]
        assert read == [record_of(r) for r in active_jobs(s)]
        assert read[0].current == config and read[1].wait_time == 7.5


def test_a_job_inserted_at_once_reads_as_one_added_through_its_row(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    with Sessions.begin() as s:
        unit = Unit(s)
        fresh = unit.add_job(make_spec("new", submit_time=3.0), now=5.0, free=True)
        added = unit.add_job(make_spec("old", submit_time=3.0), now=5.0)
        assert fresh == dataclasses.replace(added, id="new")
        unit.transition("new", S.QUEUED, now=6.0)  # a change loads the row it wrote
    with Sessions() as s:
        rows = {r.id: record_of(r) for r in active_jobs(s)}
        assert rows["new"].state == S.QUEUED and rows["new"].state_changed_at == 6.0
        assert (
            dataclasses.replace(
                rows["new"], id="old", state=S.SUBMITTED, state_changed_at=5.0, updated_at=5.0
            )
            == rows["old"]
        )
