"""The one scheduling step: round clock, fragments, refill, sparing, validation, reasons."""

from __future__ import annotations

import dataclasses

import pytest
from two_types import CLUSTER, SETTINGS, cfg

from hopsd.core.model import Assignment, Job, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import (
    FRAGMENT,
    IDLE,
    ROUND,
    PlanRuleError,
    RoundClock,
    StepOptions,
    applied,
    free_gpus,
    schedule_step,
    validate_plan,
)
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.plugins import get_policy


def job(job_id: str, demands: tuple[int, ...] = (1,), **kw: object) -> Job:
    return Job(job_id, demands, 1e6, **kw)  # type: ignore[arg-type]


def snap(*jobs: Job, now: float = 0.0, **kw: object) -> Snapshot:
    return Snapshot(now=now, cluster=CLUSTER, jobs=tuple(jobs), **kw)  # type: ignore[arg-type]


class Fixed:
    """A policy that answers with given plans (to exercise the step's own rules)."""

    name = "fixed"

    def __init__(self, round_plan: Plan, fragment_plan: Plan | None = None) -> None:
        self.round_plan = round_plan
        self.fragment_plan = fragment_plan or Plan()
        self.calls: list[str] = []

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        self.calls.append("round")
        return self.round_plan

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        self.calls.append("fragment")
        return self.fragment_plan


def test_round_clock_rounds_then_fragments_then_rounds_again() -> None:
    policy = get_policy("fifo")
    clock = RoundClock(100.0)
    first = schedule_step(snap(job("a"), now=0.0), clock, policy, SETTINGS)
    assert first.kind == ROUND and first.clock.last_round_at == 0.0
    running = job("a", current=first.plan.placements()["a"])
    quiet = schedule_step(snap(running, now=50.0), first.clock, policy, SETTINGS)
    assert quiet.kind == IDLE  # nothing waits: no planning between rounds
    arrived = schedule_step(snap(running, job("b"), now=60.0), first.clock, policy, SETTINGS)
    assert arrived.kind == FRAGMENT and "b" in arrived.plan.placements()
    assert arrived.clock.last_round_at == 0.0
    unchanged = schedule_step(
        snap(running, job("b"), now=61.0), first.clock, policy, SETTINGS, changed=False
    )
    assert unchanged.kind == IDLE
    later = schedule_step(snap(running, now=100.0), first.clock, policy, SETTINGS)
    assert later.kind == ROUND and later.clock.last_round_at == 100.0


def test_a_round_plan_that_leaves_gpus_idle_is_refilled_in_the_same_step() -> None:
    a = job("a", (2, 4), current=cfg("a1", 4))
    round_plan = Plan(preempt=("a",))  # frees a1 and starts nobody
    refill = Plan(start=(Assignment("b", cfg("a1", 2)), Assignment("a", cfg("a1", 2))))
    policy = Fixed(round_plan, refill)
    result = schedule_step(snap(a, job("b", (2,)), now=0.0), RoundClock(100.0), policy, SETTINGS)
    assert policy.calls == ["round", "fragment"] and result.refilled
    assert [x.job_id for x in result.plan.start] == ["b"]
    assert [(x.job_id, x.config) for x in result.plan.move] == [("a", cfg("a1", 2))]
    assert result.plan.preempt == ()


def test_refilled_job_that_lands_where_it_was_is_kept() -> None:
    a = job("a", current=cfg("a1", 4), demands=(4,))
    policy = Fixed(Plan(preempt=("a",)), Plan(start=(Assignment("a", cfg("a1", 4)),)))
    result = schedule_step(snap(a, now=0.0), RoundClock(100.0), policy, SETTINGS)
    assert result.plan.keep == (Assignment("a", cfg("a1", 4)),)
    assert not result.plan.move and not result.plan.preempt and not result.acted


def test_a_job_about_to_finish_is_spared_and_starts_that_no_longer_fit_dropped() -> None:
    store = InMemoryThroughputStore()
    store.set_type_aggregated("a", "a100", 4, 1000.0)  # 4000 samples/s on 4 GPUs
    a = Job("a", (4,), 1e6, samples_done=1e6 - 40_000, current=cfg("a1", 4))  # 10 s left
    plan = Plan(preempt=("a",), start=(Assignment("b", cfg("a1", 4)),))
    options = StepOptions(spare_guard_s=60.0, refill_after_round=False)
    s = snap(a, job("b", (4,)), now=0.0, store=store)
    result = schedule_step(s, RoundClock(100.0), Fixed(plan), SETTINGS, options)
    assert result.spared == ("a",)
    assert result.plan.keep == (Assignment("a", cfg("a1", 4)),) and result.plan.start == ()
    assert "finishes before a move would pay off" in result.reasons["a"]
    unspared = schedule_step(s, RoundClock(100.0), Fixed(plan), SETTINGS, StepOptions())
    assert unspared.plan.preempt == ("a",)


def test_a_move_onto_a_spared_jobs_gpus_is_undone() -> None:
    """Sparing never double-books: the job moving onto the spared GPUs stays where it runs."""
    store = InMemoryThroughputStore()
    store.set_type_aggregated("a", "a100", 4, 1000.0)
    a = Job("a", (4,), 1e6, samples_done=1e6 - 40_000, current=cfg("a1", 4))  # 10 s left
    c = job("c", (4,), current=cfg("k1", 4))
    plan = Plan(preempt=("a",), move=(Assignment("c", cfg("a1", 4)),))
    options = StepOptions(spare_guard_s=60.0, refill_after_round=False)
    s = snap(a, c, now=0.0, store=store)
    result = schedule_step(s, RoundClock(100.0), Fixed(plan), SETTINGS, options)
    assert result.spared == ("a",)
    assert set(result.plan.keep) == {Assignment("a", cfg("a1", 4)), Assignment("c", cfg("k1", 4))}
    assert result.plan.move == () and result.plan.preempt == ()
    validate_plan(s, result.plan, fragment=False)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (Plan(start=(Assignment("q", cfg("k1", 1)), Assignment("q", cfg("a1", 1)))), "twice"),
        (Plan(start=(Assignment("q", cfg("k1", 3)),)), "outside"),
        (Plan(start=(Assignment("r", cfg("k1", 1)),)), "not queued"),
        (Plan(keep=(Assignment("r", cfg("k1", 1)),)), "does not run"),
        (Plan(preempt=("q",)), "not running"),
        (Plan(start=(Assignment("q", cfg("a1", 4)),)), "over capacity"),
    ],
)
def test_plans_that_break_a_rule_are_refused(plan: Plan, message: str) -> None:
    s = snap(job("q", (1, 4)), job("r", current=cfg("a1", 1)))
    with pytest.raises(PlanRuleError, match=message):
        validate_plan(s, plan, fragment=False)


def test_fragment_plans_never_move_or_preempt() -> None:
    s = snap(job("r", current=cfg("a1", 1)), job("q"))
    with pytest.raises(PlanRuleError, match="pinned"):
        validate_plan(s, Plan(preempt=("r",)), fragment=True)
    policy = Fixed(Plan(), Plan(move=(Assignment("r", cfg("k1", 1)),)))
    with pytest.raises(PlanRuleError):
        schedule_step(s, RoundClock(100.0, last_round_at=0.0), policy, SETTINGS)


def test_every_job_gets_a_reason() -> None:
    s = snap(job("r", current=cfg("a1", 4), demands=(4,)), job("big", (8,)), job("q", (2,)))
    result = schedule_step(s, RoundClock(100.0), get_policy("fifo"), SETTINGS)
    assert set(result.reasons) == {"r", "big", "q"}
    assert result.reasons["big"].startswith("waiting")
    assert result.reasons["q"].startswith(("started", "waiting"))


def test_applied_snapshot_pins_what_the_plan_placed() -> None:
    s = snap(job("r", current=cfg("a1", 1)), job("q"), job("p", current=cfg("k1", 1)))
    plan = Plan(start=(Assignment("q", cfg("k1", 2 - 1)),), preempt=("p",))
    after = applied(s, plan)
    placed = {j.id: j.current for j in after.jobs}
    assert placed == {"r": cfg("a1", 1), "q": cfg("k1", 1), "p": None}
    assert after.pinned == {"r", "q"}
    assert free_gpus(after, None) == {"k1": 3, "a1": 3}


@pytest.mark.parametrize("name", ["hops", "fifo", "gavel", "sia"])
def test_every_registered_policy_plans_through_the_step(name: str) -> None:
    jobs = [job(f"j{i}", (1, 2)) for i in range(5)]
    result = schedule_step(snap(*jobs), RoundClock(100.0), get_policy(name), SETTINGS)
    assert result.kind == ROUND
    used = result.plan.gpus_used()
    assert all(used.get(n.id, 0) <= n.gpus for n in CLUSTER.nodes)
    assert result.plan.start  # the empty cluster takes somebody


def test_hops_uses_the_configured_priority_and_hops_lr_fixes_it() -> None:
    ftf = dataclasses.replace(SETTINGS, priority="ftf", lam=2.0)
    assert get_policy("hops")._settings(ftf).priority == "ftf"  # type: ignore[attr-defined]
    assert get_policy("hops-lr")._settings(ftf).priority == "lr"  # type: ignore[attr-defined]
