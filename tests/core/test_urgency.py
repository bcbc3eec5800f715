"""Early rounds: a queued job passing its LR bound gets a round before the clock's."""

from __future__ import annotations

import pytest
from two_types import CLUSTER, SETTINGS, cfg

from hopsd.core.estimator import Estimator
from hopsd.core.model import Job
from hopsd.core.policies.hops import HopsSettings
from hopsd.core.priorities import PriorityContext, age
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import FRAGMENT, IDLE, ROUND, RoundClock, schedule_step
from hopsd.core.typed_settings import SettingsError
from hopsd.core.urgency import RoundAges
from hopsd.core.urgency import early_round_at as rule
from hopsd.plugins import get_policy


def _age(job: Job, snapshot: Snapshot) -> float:
    estimator = Estimator(snapshot.cluster, snapshot.store, SETTINGS)
    return age(job, PriorityContext(snapshot.now, snapshot.cluster, estimator, 1))


def early_round_at(
    snapshot: Snapshot, settings: object, bound: float, last: float | None, gap_s: float
) -> float | None:
    return rule(snapshot, bound, last, gap_s, lambda job: _age(job, snapshot))


def _full(now: float, *queued: Job) -> Snapshot:
    """Both nodes held by long jobs, ``queued`` waiting."""
    running = (
        Job("long-k", (4,), 1e9, current=cfg("k1", 4)),
        Job("long-a", (4,), 1e9, current=cfg("a1", 4)),
    )
    return Snapshot(now=now, cluster=CLUSTER, jobs=(*running, *queued))


def test_the_round_is_due_when_the_queued_jobs_lr_reaches_the_bound() -> None:
    short = Job("short", (1,), 2e4, wait_time=10.0)
    snapshot = _full(1000.0, short)
    expected = 1000.0 + 0.25 * _age(short, snapshot) - 10.0
    assert early_round_at(snapshot, SETTINGS, 0.25, 990.0, 0.0) == pytest.approx(expected)


def test_the_soonest_of_several_queued_jobs_sets_the_instant() -> None:
    small, large = Job("small", (1,), 1e4), Job("large", (1,), 1e6)
    snapshot = _full(1000.0, large, small)
    expected = 1000.0 + 0.5 * _age(small, snapshot)
    assert early_round_at(snapshot, SETTINGS, 0.5, 990.0, 0.0) == pytest.approx(expected)


def test_a_job_that_passed_the_bound_before_the_last_round_asks_no_other() -> None:
    stale = Job("stale", (1,), 2e4, wait_time=10_000.0)
    assert early_round_at(_full(1000.0, stale), SETTINGS, 0.25, 990.0, 0.0) is None


def test_an_early_round_keeps_its_distance_from_the_last_round() -> None:
    short = Job("short", (1,), 2e4, wait_time=0.0)
    snapshot = _full(1000.0, short)
    assert 0.25 * _age(short, snapshot) < 60.0
    assert early_round_at(snapshot, SETTINGS, 0.25, 990.0, 60.0) == pytest.approx(1050.0)


def test_no_bound_or_no_round_yet_means_no_early_round() -> None:
    snapshot = _full(1000.0, Job("short", (1,), 2e4))
    assert early_round_at(snapshot, SETTINGS, 0.0, 990.0, 0.0) is None
    assert early_round_at(snapshot, SETTINGS, 0.25, None, 0.0) is None
    assert early_round_at(_full(1000.0), SETTINGS, 0.25, 990.0, 0.0) is None


def test_the_step_plans_a_round_early_for_hops_with_a_bound_and_not_without() -> None:
    waited = Job("short", (1,), 2e4, wait_time=0.0)
    probe = _full(1000.0, waited)
    wait = 0.3 * _age(waited, probe)  # past a bound of 0.25, before the clock's round
    snapshot = _full(1000.0, Job("short", (1,), 2e4, wait_time=wait))
    clock = RoundClock(SETTINGS.round_length_s, 1000.0 - wait)
    assert not clock.due(1000.0)
    eager = get_policy("hops", HopsSettings(early_round_lr=0.25, early_round_gap_s=0.0))
    on_clock = get_policy("hops", HopsSettings(early_round_lr=0.0))
    early = schedule_step(snapshot, clock, eager, SETTINGS, changed=False)
    late = schedule_step(snapshot, clock, on_clock, SETTINGS, changed=False)
    assert early.kind == ROUND and early.clock.last_round_at == 1000.0
    assert "short" in early.plan.placements()
    assert late.kind in (IDLE, FRAGMENT) and "short" not in late.plan.placements()


def test_the_step_says_when_the_next_early_round_falls() -> None:
    snapshot = _full(1000.0, Job("short", (1,), 2e4))
    clock = RoundClock(SETTINGS.round_length_s, 995.0)
    eager = get_policy("hops", HopsSettings(early_round_lr=0.25, early_round_gap_s=0.0))
    result = schedule_step(snapshot, clock, eager, SETTINGS, changed=False)
    expected = 1000.0 + 0.25 * _age(snapshot.jobs[-1], snapshot)
    assert result.kind == IDLE
    assert result.early_round_at == pytest.approx(expected)


@pytest.mark.parametrize("field", ["early_round_lr", "early_round_gap_s"])
def test_a_negative_setting_is_refused(field: str) -> None:
    with pytest.raises(SettingsError):
        HopsSettings(**{field: -1.0})  # type: ignore[arg-type]


def test_ages_are_estimated_once_a_round_and_again_after_the_next() -> None:
    from hopsd.core.throughput import InMemoryThroughputStore

    store = InMemoryThroughputStore()
    short = Job("short", (1,), 2e4)
    snapshot = Snapshot(now=0.0, cluster=CLUSTER, jobs=(short,), store=store)
    ages = RoundAges()
    first = ages.age_of(snapshot, SETTINGS, 0.0)(short)
    store.set_type_aggregated("short", "k80", 1, 1e4)  # the store learns a fast rate
    store.set_type_aggregated("short", "a100", 1, 1e4)
    assert ages.age_of(snapshot, SETTINGS, 0.0)(short) == first  # same round: kept
    assert ages.age_of(snapshot, SETTINGS, 100.0)(short) < first  # a new round: estimated again


def test_hopsd_s_wrapped_policy_asks_for_the_same_early_round() -> None:
    from hopsd.core.closing import ClosingAware
    from hopsd.core.quota import Quota, QuotaPolicy

    snapshot = _full(1000.0, Job("short", (1,), 2e4))
    inner = get_policy("hops", HopsSettings(early_round_lr=0.25, early_round_gap_s=0.0))
    expected = inner.early_round_at(snapshot, SETTINGS, 995.0)  # type: ignore[attr-defined]
    assert expected is not None
    wrapped = QuotaPolicy(ClosingAware(inner), Quota(limits={"u": 8}))
    assert wrapped.early_round_at(snapshot, SETTINGS, 995.0) == expected
    result = schedule_step(snapshot, RoundClock(100.0, 995.0), wrapped, SETTINGS, changed=False)
    assert result.early_round_at == pytest.approx(expected)


def test_a_job_first_seen_later_in_the_round_is_aged_on_that_steps_store() -> None:
    from hopsd.core.throughput import InMemoryThroughputStore

    first, late = Job("first", (1,), 2e4), Job("late", (1,), 2e4)
    before = Snapshot(now=0.0, cluster=CLUSTER, jobs=(first,))
    learned = InMemoryThroughputStore()
    for gpu_type in ("k80", "a100"):
        learned.set_type_aggregated("late", gpu_type, 1, 1e4)  # its profiling measured it fast
    after = Snapshot(now=10.0, cluster=CLUSTER, jobs=(first, late), store=learned)
    ages = RoundAges()
    ages.age_of(before, SETTINGS, 0.0)(first)
    assert ages.age_of(after, SETTINGS, 0.0)(late) == pytest.approx(_age(late, after))
    assert ages.age_of(after, SETTINGS, 0.0)(late) < _age(late, before)
