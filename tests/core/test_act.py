"""The act stage: a plan's actions in enacting order, a notice only for jobs that hear one."""

from __future__ import annotations

from hopsd.core.act import MOVE, PREEMPT, START, Act, act
from hopsd.core.model import Assignment, Cluster, Configuration, GpuType, Job, Node, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, StepOptions, schedule_step

CLUSTER = Cluster.build([GpuType("k80")], [Node("k1", "k80", 4)])
TWO = Configuration("k80", (("k1", 2),))
PLAN = Plan(start=(Assignment("s", TWO),), move=(Assignment("m", TWO),), preempt=("p", "q"))


def test_moves_and_preemptions_of_listening_jobs_start_with_a_notice() -> None:
    assert act(PLAN, {"m", "q"}, notices=True) == (
        Act("s", START, TWO),
        Act("m", MOVE, TWO, notice=True),
        Act("p", PREEMPT),
        Act("q", PREEMPT, notice=True),
    )
    assert all(a.notice for a in act(PLAN, None, notices=True)[1:])  # None: every job hears
    assert not any(a.notice for a in act(PLAN, None, notices=False))


class Preempting:
    """A policy that preempts the running job and starts the queued one in its place."""

    name = "preempting"

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return Plan(start=(Assignment("new", TWO),), preempt=("old",))

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return Plan()


def test_the_step_returns_its_actions_and_says_who_hears_a_notice() -> None:
    jobs = (Job("old", (2,), 1e6, current=TWO), Job("new", (2,), 1e6))
    clock, policy, settings = RoundClock(10.0), Preempting(), Settings()
    deaf = Snapshot(0.0, CLUSTER, jobs, listening=frozenset())
    heard = Snapshot(0.0, CLUSTER, jobs, listening=frozenset({"old"}))
    on = StepOptions(notice=True)
    assert schedule_step(heard, clock, policy, settings, on).actions == (
        Act("new", START, TWO),
        Act("old", PREEMPT, notice=True),
    )
    assert not schedule_step(deaf, clock, policy, settings, on).actions[1].notice
    assert not schedule_step(heard, clock, policy, settings).actions[1].notice  # notices off
