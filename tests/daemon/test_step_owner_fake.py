"""The scheduling step is the one owner of what hopsd plans around (in-memory Slurm).

The tick reserves in-flight work once, through the core's reserve stage, and
hands the step what it reserved; ``hops submit --test-only`` forecasts with the
work in flight, which the forecast's own step reserves by the same stage.
"""

from __future__ import annotations

import dataclasses
from typing import NoReturn

import pytest
from daemon_fakeport import FakeClock, FakePort
from spool_tick import row_of
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.core import reserve as reserve_stage
from hopsd.core.reserve import flights
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import PlanRuleError
from hopsd.daemon.flights import in_flight
from hopsd.daemon.holds import UNPLANNED
from hopsd.daemon.test_only import _input
from hopsd.daemon.tick import Tick
from hopsd.ledger.unit import Ledger
from hopsd.sim.forecast import forecast
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((4,), 1e7)


@pytest.fixture
def surprise(port: FakePort) -> int:
    """A hops job Slurm started on fast1 without a hops decision (its owner released it)."""
    job = port.add_job(TAG, user_hold=True)
    port.owner_release(job, start_on={"fast1": 4})
    return job


@pytest.fixture
def tick(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> Tick:
    return Tick(config, port, sessions, clock=clock)


@pytest.fixture
def under_notice(
    surprise: int,
    config: HopsConfig,
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Tick, str]:
    """The surprise told to checkpoint (as if its probe had reported: one adopted running
    never has): in flight for 30 s."""
    monkeypatch.setattr("hopsd.daemon.assemble.hears_notice", lambda startup_s: True)
    config = dataclasses.replace(config, checkpoint_grace_s=30.0)
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    assert port.actions(surprise) == ["signal"]
    clock.advance(5)
    return tick, str(surprise)


def test_an_unplanned_start_that_hears_notices_is_requeued_once_after_its_grace(
    under_notice: tuple[Tick, str],
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
) -> None:
    tick, job = under_notice
    assert row_of(sessions, int(job)).plan_reason == UNPLANNED
    tick.run_once()  # under notice: in flight, not requeued (nor told) twice
    assert port.actions(int(job)) == ["signal"] and port.jobs[int(job)].state == "RUNNING"
    clock.advance(31)
    tick.run_once()
    assert port.actions(int(job))[:2] == ["signal", "requeue_hold"]
    assert port.actions(int(job)).count("requeue_hold") == 1


def test_the_tick_reserves_in_flight_work_once(
    under_notice: tuple[Tick, str], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    tick, job = under_notice
    reserved: list[Snapshot] = []
    counted = reserve_stage.reserved_gpus

    def counting(snapshot: Snapshot) -> dict[str, int]:
        reserved.append(snapshot)
        return counted(snapshot)

    monkeypatch.setattr(reserve_stage, "reserved_gpus", counting)
    result = tick.run_once()
    assert len(reserved) == 1  # the tick's; the step is handed the reserved snapshot
    assert [f.job_id for f in reserved[0].in_flight] == [job]
    assert result.decision is None or job not in result.decision.plan.placements()


def test_test_only_forecasts_work_in_flight_where_it_lands(
    under_notice: tuple[Tick, str],
    config: HopsConfig,
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
) -> None:
    """The unplanned start under notice is in the forecast, requeued: it starts again
    later (not "runs now" on GPUs it is about to leave)."""
    _, job = under_notice
    with Ledger(sessions).unit() as unit:
        given, _ = _input(config, unit, port, clock())
    assert [f.job_id for f in flights(given.snapshot)] == [job]
    seen = forecast(given)[job]
    assert seen.start_at is not None and seen.start_at >= clock()


def test_an_unplanned_start_is_requeued_when_planning_fails(
    surprise: int,
    monkeypatch: pytest.MonkeyPatch,
    tick: Tick,
    port: FakePort,
    sessions: sessionmaker[Session],
) -> None:
    def failing(*args: object, **kwargs: object) -> NoReturn:
        raise PlanRuleError("a policy that breaks a rule")

    monkeypatch.setattr("hopsd.daemon.tick.decide", failing)
    tick.run_once()
    assert port.actions(surprise)[0] == "requeue_hold"
    assert row_of(sessions, surprise).state_reason == UNPLANNED


def test_a_job_under_notice_is_in_flight_until_its_grace_ends(
    under_notice: tuple[Tick, str], sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    """The in-flight record carries the notice's end (signal time + grace, from the ledger):
    a forecast lands the requeue then, not at once."""
    _, job = under_notice
    with Ledger(sessions).unit() as unit:
        (flight,) = in_flight(unit)
    assert flight.job_id == job and flight.runs_on
    assert flight.until == pytest.approx(clock() - 5 + 30.0)  # told 5 s ago, 30 s of grace
