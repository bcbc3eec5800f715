"""The act stage: a plan's actions in enacting order, a notice only for jobs that hear one."""

from __future__ import annotations

import dataclasses

from hopsd.core.act import (
    HOLD,
    LAUNCH_FAILURE_S,
    MAX_RELAUNCHES,
    MOVE,
    PREEMPT,
    RELAUNCH,
    REQUEUE,
    START,
    USER_HOLD,
    Act,
    act,
    hold,
    relaunch,
)
from hopsd.core.model import Assignment, Cluster, Configuration, GpuType, Job, Node, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import InFlight, LaunchFailure, PendingJob, Snapshot
from hopsd.core.step import RoundClock, StepOptions, schedule_step
from hopsd.plugins import get_policy

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


def test_the_step_requeues_an_unplanned_start_and_tells_it_only_if_it_hears() -> None:
    """An unplanned start is requeued by the act stage, with a notice under a preemption's
    rule: a job whose probe never reported (not listening) is requeued at once."""
    jobs = (Job("surprise", (2,), 1e6, current=TWO), Job("new", (2,), 1e6))
    clock, policy, on = RoundClock(10.0), get_policy("fifo"), StepOptions(notice=True)
    deaf = Snapshot(0.0, CLUSTER, jobs, listening=frozenset(), unplanned=frozenset({"surprise"}))
    step = schedule_step(deaf, clock, policy, Settings(), on)
    assert Act("surprise", REQUEUE) in step.actions  # no notice
    heard = dataclasses.replace(deaf, listening=frozenset({"surprise"}))
    told = schedule_step(heard, clock, policy, Settings(), on)
    assert Act("surprise", REQUEUE, notice=True) in told.actions
    # it keeps its GPUs until it is off them: the queued job starts on the other two
    assert [a.job_id for a in told.plan.start] == ["new"]
    assert "surprise" not in told.plan.placements()


def test_an_unplanned_start_already_in_flight_is_not_requeued_again() -> None:
    jobs = (Job("surprise", (2,), 1e6, current=TWO),)
    given = Snapshot(
        0.0,
        CLUSTER,
        jobs,
        unplanned=frozenset({"surprise"}),
        in_flight=(InFlight("surprise", runs_on=True),),
    )
    step = schedule_step(given, RoundClock(10.0), get_policy("fifo"), Settings())
    assert step.actions == ()


def test_a_failed_launch_is_relaunched_only_when_hops_released_it_and_tries_remain() -> None:
    failed = {"state": "FAILED", "start_time": 100.0, "end_time": 101.0}
    assert relaunch("j", **failed, tries=0, released_by_hops=True) == Act("j", RELAUNCH)
    assert relaunch("j", **failed, tries=MAX_RELAUNCHES, released_by_hops=True) is None
    assert relaunch("j", **failed, tries=0, released_by_hops=False) is None
    ran = {**failed, "end_time": 100.0 + LAUNCH_FAILURE_S + 1}  # it ran: its script failed
    assert relaunch("j", **ran, tries=0, released_by_hops=True) is None
    done = {**failed, "state": "COMPLETED"}
    assert relaunch("j", **done, tries=0, released_by_hops=True) is None


def test_hops_holds_a_pending_job_its_owner_could_release() -> None:
    assert hold(PendingJob("j", True, USER_HOLD)) == Act("j", HOLD)
    assert hold(PendingJob("j", False, "None")) == Act("j", HOLD)  # released by its owner
    assert hold(PendingJob("j", True, "JobHeldAdmin")) is None  # hops's own
    assert hold(PendingJob("j", False, "Resources", released_by_hops=True)) is None
    # a user's hold on a job hops released (``scontrol uhold``) becomes hops's own again
    assert hold(PendingJob("j", True, USER_HOLD, released_by_hops=True)) == Act("j", HOLD)


def test_the_step_holds_first_and_only_jobs_not_in_flight() -> None:
    """Holds come before every other action (a job the same step starts is held before its
    placement is written); a pending job whose chain is under way is not judged again."""
    queued = Job("s", demands=(2,), total_samples=1e6)
    pending = (PendingJob("s", True, USER_HOLD), PendingJob("f", True, USER_HOLD))
    snap = Snapshot(
        now=100.0, cluster=CLUSTER, jobs=(queued,), pending=pending, in_flight=(InFlight("f"),)
    )
    step = schedule_step(snap, RoundClock(60.0), get_policy("hops"), Settings(), StepOptions())
    assert [(a.job_id, a.kind) for a in step.actions] == [("s", HOLD), ("s", START)]


def failure(job_id: str, *, tries: int = 0, released: bool = True) -> LaunchFailure:
    """A run Slurm ended FAILED a second after its start."""
    return LaunchFailure(job_id, "FAILED", 100.0, 101.0, tries, released)


def test_the_step_relaunches_a_failed_launch_hops_released_a_bounded_number_of_times() -> None:
    """The relaunch rule runs in the step: a failed launch hops released is relaunched
    until MAX_RELAUNCHES tries; one hops did not release, or a run that really ran, ends."""
    jobs = (Job("q", (2,), 1e6),)
    ran_long = LaunchFailure("long", "FAILED", 100.0, 100.0 + 10 * LAUNCH_FAILURE_S, 0, True)
    failures = (
        failure("again"),
        failure("spent", tries=MAX_RELAUNCHES),
        failure("theirs", released=False),
        ran_long,
    )
    given = Snapshot(0.0, CLUSTER, jobs, launch_failures=failures)
    step = schedule_step(given, RoundClock(10.0), get_policy("fifo"), Settings())
    assert [a for a in step.actions if a.kind == RELAUNCH] == [Act("again", RELAUNCH)]
    assert step.actions[-1] == Act("again", RELAUNCH)  # after the plan's own actions
    # the plan went on as without the failures (they run nowhere)
    assert [a.job_id for a in step.plan.start] == ["q"]


def test_a_failed_launch_whose_relaunch_is_in_flight_is_not_relaunched_again() -> None:
    given = Snapshot(0.0, CLUSTER, (), launch_failures=(failure("r"),), in_flight=(InFlight("r"),))
    step = schedule_step(given, RoundClock(10.0), get_policy("fifo"), Settings())
    assert not any(a.kind == RELAUNCH for a in step.actions)
