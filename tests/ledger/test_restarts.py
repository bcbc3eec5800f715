"""A restart measured whole, from hops's decision to the first iteration after it.

The intents and runs a move and a preemption leave in the ledger (as hopsd's
decide and reconcile write them) give the whole restart; the parts the probe
measures alone (start to first iteration) would miss the requeue and the
launch. A later job of the same model starts from the model's median.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.model import Configuration
from hopsd.ledger.measurements import MeasurementStore
from hopsd.ledger.models import JobRow
from hopsd.ledger.records import IntentAction, IntentRequest, JobSpec
from hopsd.ledger.unit import Ledger, Unit

A = IntentAction
HERE = Configuration.of("a100", {"a100n1": 2})


def intents(
    unit: Unit, job: str, at: float, steps: list[tuple[IntentAction, dict[str, Any]]]
) -> None:
    """Record a decision's intents at ``at`` and mark them done."""
    requests = [IntentRequest(job, action, payload) for action, payload in steps]
    for record in unit.record_intents(requests, None, at):
        unit.mark_done(record.id, at + 0.5)


def whole(sessions: sessionmaker[Session], job: str, run: int, at: float) -> float | None:
    with sessions.begin() as s:
        store = MeasurementStore(s)
        store.note_whole_restart(job, run, at)
    with Ledger(sessions).reading() as unit:
        return unit.jobs([job])[job].restart_s


@pytest.fixture
def job(Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]) -> str:
    with Ledger(Sessions).unit() as unit:
        unit.add_job(make_spec("j1", model_name="bert"), 100.0)
        unit.open_run("j1", 0, "run", HERE, 110.0)
    return "j1"


def test_a_move_costs_from_its_decision_to_the_first_iteration_after_it(
    Sessions: sessionmaker[Session], job: str
) -> None:
    with Ledger(Sessions).unit() as unit:
        base = {"kind": "move", "restarts": 0}
        intents(unit, job, 200.0, [(A.NOTICE, base), (A.REQUEUE_HOLD, base),
                                   (A.RELEASE, {"kind": "move", "run": 1})])  # fmt: skip
        unit.close_run(job, 202.0, "moved")
        unit.open_run(job, 1, "run", HERE, 204.5)
    # first iteration at 206: notice, checkpoint, requeue, launch and start-up, all of it
    assert whole(Sessions, job, 1, 206.0) == pytest.approx(6.0)


def test_a_preemption_and_a_later_start_cost_their_two_ends_not_the_wait_between(
    Sessions: sessionmaker[Session], job: str
) -> None:
    with Ledger(Sessions).unit() as unit:
        stop = {"kind": "preempt", "restarts": 0}
        intents(unit, job, 200.0, [(A.NOTICE, stop), (A.REQUEUE_HOLD, stop)])
        unit.close_run(job, 203.0, "preempted")  # 3 s from the decision to the run's end
        # queued 97 s, then started again: release at 300, first iteration at 304
        intents(unit, job, 300.0, [(A.RELEASE, {"kind": "start", "run": 1})])
        unit.open_run(job, 1, "run", HERE, 302.0)
    assert whole(Sessions, job, 1, 304.0) == pytest.approx(3.0 + 4.0)


def test_a_restart_hops_did_not_decide_is_not_measured(
    Sessions: sessionmaker[Session], job: str
) -> None:
    with Ledger(Sessions).unit() as unit:
        unit.close_run(job, 203.0, "requeued")  # an admin's requeue: no intent of hops
        unit.open_run(job, 1, "run", HERE, 230.0)
    assert whole(Sessions, job, 1, 232.0) is None


def test_a_new_job_of_a_model_starts_from_the_models_median_restart(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    with Ledger(Sessions).unit() as unit:
        for n in range(3):
            unit.add_job(make_spec(f"old{n}", model_name="bert"), 100.0)
    for n, cost in enumerate((4.0, 6.0, 30.0)):
        with Sessions.begin() as s:
            s.get(JobRow, f"old{n}").restart_s = cost  # type: ignore[union-attr]
    with Ledger(Sessions).unit() as unit:
        unit.add_job(make_spec("new", model_name="bert"), 200.0)
        unit.add_job(make_spec("other", model_name="gpt2"), 200.0)
    with Ledger(Sessions).reading() as unit:
        found = unit.jobs(["new", "other"])
    assert found["new"].model_restart_s == 6.0 and found["new"].restart_s is None
    assert found["other"].model_restart_s is None


def test_each_profiled_job_has_its_own_phase_and_the_median_is_over_them(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    """j1 profiled on two types in 10 s (runs of 4 s and 5 s, 1 s between), j2, a slow
    starter, on three in 60 s; j3 never profiled; j4's one run has not ended."""
    k80 = Configuration.of("k80", {"k80n1": 1})
    with Ledger(Sessions).unit() as unit:
        for name in ("j1", "j2", "j3", "j4"):
            unit.add_job(make_spec(name), 100.0)
        runs = {"j1": ((100.0, 104.0), (105.0, 110.0)), "j2": ((100.0, 120.0), (120.0, 140.0),
                                                            (140.0, 160.0))}  # fmt: skip
        for job, spans in runs.items():
            for run, (start, end) in enumerate(spans):
                unit.open_run(job, run, "profiling", k80, start)
                unit.close_run(job, end, "requeued")
        unit.open_run("j3", 0, "run", k80, 100.0)
        unit.open_run("j4", 0, "profiling", k80, 150.0)
    every = ["j1", "j2", "j3", "j4"]
    with Ledger(Sessions).reading() as unit:
        assert unit.profiling_phases_s(every) == {"j1": 10.0, "j2": 60.0}
        assert unit.profiling_phase_s(every) == pytest.approx(35.0)
        assert unit.profiling_phases_s([]) == {}
