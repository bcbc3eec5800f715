"""The reserve stage: in-flight work is not planned again and keeps the GPUs it holds or takes."""

from __future__ import annotations

import pytest
from two_types import CLUSTER, SETTINGS, cfg

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Job
from hopsd.core.reserve import landing, reserve, reserved_gpus
from hopsd.core.settings import Settings
from hopsd.core.snapshot import InFlight, LaunchFailure, Snapshot
from hopsd.core.step import RoundClock, schedule_step
from hopsd.plugins import get_policy


def snap(*jobs: Job, in_flight: tuple[InFlight, ...] = (), **kw: object) -> Snapshot:
    return Snapshot(0.0, CLUSTER, tuple(jobs), in_flight=in_flight, **kw)  # type: ignore[arg-type]


def test_a_job_under_notice_keeps_its_gpus_and_its_target() -> None:
    moving = Job("m", (2,), 1e6, current=cfg("k1", 2))
    flying = InFlight("m", target=(("a1", 2),), runs_on=True)
    held = reserve(snap(moving, Job("q", (1,), 1e6), in_flight=(flying,), pinned=frozenset("m")))
    assert [j.id for j in held.jobs] == ["q"]
    assert held.capacity == {"k1": 2, "a1": 2}
    assert held.pinned == frozenset() and held.in_flight == ()
    assert reserve(held) is held  # spent: reserving again changes nothing


def test_a_requeued_job_reserves_only_its_target() -> None:
    requeued = Job("r", (2,), 1e6)  # off its GPUs, waiting for its placement's release
    held = reserve(snap(requeued, in_flight=(InFlight("r", (("a1", 3),)),)))
    assert held.jobs == () and held.capacity == {"k1": 4, "a1": 1}


def test_a_chain_of_a_job_outside_the_snapshot_still_reserves_its_target() -> None:
    # a profiling run's placement: the job is the profiling queue's, not planned here
    flying = (InFlight("p", (("k1", 1),)), InFlight("x", (("gone", 2),), runs_on=True))
    assert reserved_gpus(snap(in_flight=flying)) == {"k1": 1, "gone": 2}
    assert reserve(snap(in_flight=flying)).capacity == {"k1": 3, "a1": 4}


def test_a_move_onto_a_noticed_jobs_gpus_counts_them_once() -> None:
    # on a100: "p" (2 GPUs, preempted under notice) and "b" (2 GPUs, untouched);
    # "m" moves from the k80s onto p's two a100s once p has left them
    jobs = (
        Job("p", (2,), 1e6, current=cfg("a1", 2)),
        Job("b", (2,), 1e6, current=cfg("a1", 2)),
        Job("m", (2,), 1e6, current=cfg("k1", 2)),
    )
    flying = (InFlight("p", runs_on=True), InFlight("m", (("a1", 2),), runs_on=True))
    given = snap(*jobs, in_flight=flying)
    held = reserve(given)
    assert held.capacity == {"k1": 2, "a1": 2}  # b keeps its two; nothing else is free there
    step = schedule_step(held, RoundClock(100.0), get_policy("fifo"), SETTINGS)
    assert step.plan.placements()["b"] == cfg("a1", 2)  # planned within capacity


def test_a_move_beside_a_noticed_job_reserves_both() -> None:
    # "p" holds two a100s under notice, "m" moves onto the other two: all four are taken
    jobs = (Job("p", (2,), 1e6, current=cfg("a1", 2)), Job("m", (2,), 1e6, current=cfg("k1", 2)))
    flying = (InFlight("p", runs_on=True), InFlight("m", (("a1", 2),), runs_on=True))
    assert reserved_gpus(snap(*jobs, in_flight=flying)) == {"a1": 4, "k1": 2}
    held = reserve(snap(*jobs, Job("q", (1,), 1e6), in_flight=flying))
    assert held.capacity == {"k1": 2, "a1": 0}


def test_a_start_released_onto_a_noticed_jobs_gpus_plans_on() -> None:
    # hopsd released "b" onto the GPUs of "p", preempted under notice: Slurm starts b once
    # p has left; meanwhile b shows as starting there (pinned), p as in flight
    jobs = (
        Job("p", (4,), 1e6, current=cfg("a1", 4)),
        Job("b", (4,), 1e6, current=cfg("a1", 4)),
        Job("q", (1,), 1e6),
    )
    given = snap(*jobs, in_flight=(InFlight("p", runs_on=True),), pinned=frozenset({"b"}))
    step = schedule_step(given, RoundClock(100.0), get_policy("fifo"), SETTINGS)
    assert step.plan.placements()["q"].gpu_type == "k80"  # nothing of a1 is handed out


def test_a_waiting_start_lands_early_only_where_nothing_else_holds_or_takes_its_gpus() -> None:
    # on the a100s: "q" (2 GPUs) runs on under notice; "a" waits for two GPUs there and
    # "b" for one; "k" runs on three k80s, untouched
    q, k = Job("q", (2,), 1e6, current=cfg("a1", 2)), Job("k", (3,), 1e6, current=cfg("k1", 3))
    a, b = InFlight("a", (("a1", 2),)), InFlight("b", (("a1", 1),))
    # 2 held by q + 3 promised: two GPUs look free, not enough for both starts
    assert landing(snap(q, k, in_flight=(InFlight("q", runs_on=True), a, b))) == ()
    # q has left (its job ended): both fit, whatever their order
    assert landing(snap(k, in_flight=(b, a))) == ("b", "a")
    # the k80 left free is the target of "m", moving there from the a100s under notice:
    # a start waiting for it stays until m has landed
    m = Job("m", (1,), 1e6, current=cfg("a1", 1))
    w = InFlight("w", (("k1", 1),))
    assert landing(snap(k, m, in_flight=(InFlight("m", (("k1", 1),), runs_on=True), w))) == ()
    assert landing(snap(k, in_flight=(w,))) == ("w",)
    # a job still under notice never lands early
    assert landing(snap(k, m, in_flight=(InFlight("m", (("a1", 1),), runs_on=True),))) == ()


def test_a_job_in_flight_twice_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="in flight twice"):
        snap(in_flight=(InFlight("a"), InFlight("a")))


def test_the_step_never_hands_out_reserved_gpus() -> None:
    moving = Job("m", (4,), 1e6, current=cfg("k1", 4))
    flying = InFlight("m", target=(("a1", 4),), runs_on=True)
    waiting = Job("w", (1, 2, 4), 1e6)
    step = schedule_step(
        snap(moving, waiting, in_flight=(flying,)), RoundClock(100.0), get_policy("fifo"), SETTINGS
    )
    assert step.plan.placements() == {}  # every GPU is the moving job's, now or next
    assert "m" not in step.reasons and step.reasons["w"].startswith("waiting")


def test_an_unplanned_start_keeps_its_gpus_until_it_is_requeued() -> None:
    surprise = Job("u", (2,), 1e6, current=cfg("k1", 2))
    given = snap(surprise, Job("q", (1,), 1e6), unplanned=frozenset({"u"}))
    held = reserve(given)
    assert [j.id for j in held.jobs] == ["q"] and held.capacity == {"k1": 2, "a1": 4}
    assert held.unplanned == frozenset({"u"})  # the act stage requeues it
    assert reserve(held) is held


def test_an_unplanned_start_in_flight_or_still_planned_is_not_to_requeue() -> None:
    surprise = Job("u", (2,), 1e6, current=cfg("k1", 2))
    queued = Job("q", (1,), 1e6)  # marked, but requeued already: planned like any job
    given = snap(
        surprise,
        queued,
        in_flight=(InFlight("u", runs_on=True),),
        unplanned=frozenset({"u", "q"}),
    )
    held = reserve(given)
    assert held.unplanned == frozenset() and [j.id for j in held.jobs] == ["q"]
    assert held.capacity == {"k1": 2, "a1": 4}


def test_a_failed_launch_in_flight_is_not_judged_again_and_reserving_twice_keeps_the_rest() -> None:
    failed = (
        LaunchFailure("r", "FAILED", 1.0, 2.0, 0, True),
        LaunchFailure("s", "FAILED", 1.0, 2.0),
    )
    given = snap(Job("q", (1,), 1e6), launch_failures=failed, in_flight=(InFlight("r"),))
    held = reserve(given)
    assert [f.job_id for f in held.launch_failures] == ["s"]
    assert reserve(held) == held


def test_an_unplanned_start_whose_launch_failed_is_judged_as_a_failure_not_requeued() -> None:
    """Slurm ended the run already: there is nothing to requeue; the act stage judges it
    as a failed launch (one hops did not release: it ends)."""
    failed = (LaunchFailure("u", "FAILED", 1.0, 2.0, 0, False),)
    held = reserve(snap(unplanned=frozenset({"u"}), launch_failures=failed))
    assert held.unplanned == frozenset() and held.launch_failures == failed
    step = schedule_step(held, RoundClock(10.0), get_policy("fifo"), Settings())
    assert step.actions == ()
