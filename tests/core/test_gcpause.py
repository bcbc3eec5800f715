"""The planner runs with the cyclic collector paused and always gives it back."""

from __future__ import annotations

import gc

import pytest
from two_types import CLUSTER, SETTINGS

from hopsd.core import rounds
from hopsd.core.gcpause import collector_paused
from hopsd.core.model import Job, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, schedule_step


@collector_paused
def _state_inside() -> bool:
    return gc.isenabled()


@collector_paused
def _fails() -> None:
    assert not gc.isenabled()
    raise RuntimeError("planning failed")


def test_the_collector_is_off_during_the_call_and_on_after_it() -> None:
    assert gc.isenabled()
    assert _state_inside() is False
    assert gc.isenabled()


def test_a_failing_call_gives_the_collector_back() -> None:
    with pytest.raises(RuntimeError):
        _fails()
    assert gc.isenabled()


def test_a_caller_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        assert _state_inside() is False
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Observing:
    """A policy that notes whether the collector ran while it planned."""

    name = "observing"

    def __init__(self) -> None:
        self.enabled: list[bool] = []

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        self.enabled.append(gc.isenabled())
        return Plan()

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return self.plan(snapshot, settings)


def test_the_step_plans_with_the_collector_paused() -> None:
    policy = _Observing()
    snapshot = Snapshot(now=0.0, cluster=CLUSTER, jobs=(Job("a", (1,), 1e6),))
    schedule_step(snapshot, RoundClock(100.0), policy, SETTINGS)
    assert policy.enabled and not any(policy.enabled)
    assert gc.isenabled()


def test_hops_plans_a_round_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    original = rounds.service_window

    def window(*args: object) -> object:
        seen.append(gc.isenabled())
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(rounds, "service_window", window)
    snapshot = Snapshot(now=0.0, cluster=CLUSTER, jobs=(Job("a", (1,), 1e6),))
    rounds.plan_round(snapshot, SETTINGS)
    rounds.plan_fragment(snapshot, SETTINGS)
    assert len(seen) >= 2 and not any(seen)
    assert gc.isenabled()
