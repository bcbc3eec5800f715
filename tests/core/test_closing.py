"""Closing nodes: drained ones and those of a coming reservation (hopsd.core.closing)."""

from __future__ import annotations

import math

from hopsd.core.closing import ClosingAware, Window, node_closings
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node, NodeClosing
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, schedule_step
from hopsd.plugins import get_policy

CLUSTER = Cluster.build(
    [GpuType("a100", speed=4.0)], [Node("a1", "a100", 4), Node("a2", "a100", 4)]
)
SETTINGS = Settings(round_length_s=100.0, time_limit_s=5.0)
NOW = 1000.0
LONG, SHORT = 1e10, 1e3  # samples: days of training, or seconds


def on(node: str, gpus: int) -> Configuration:
    return Configuration("a100", ((node, gpus),))


def job(job_id: str, samples: float, demands: tuple[int, ...] = (2,), **kw: object) -> Job:
    return Job(job_id, demands, samples, **kw)  # type: ignore[arg-type]


def step(*jobs: Job, closing: dict[str, NodeClosing], fragment: bool = False, **kw: object):
    snapshot = Snapshot(now=NOW, cluster=CLUSTER, jobs=jobs, closing=closing, **kw)  # type: ignore[arg-type]
    clock = RoundClock(100.0, NOW - 10.0 if fragment else None)
    return schedule_step(snapshot, clock, ClosingAware(get_policy("hops")), SETTINGS)


def nodes_of(result, job_id: str) -> set[str]:
    config = result.plan.placements().get(job_id)
    return set() if config is None else {n for n, _ in config.parts}


def test_a_drained_node_keeps_its_job_to_the_end_and_takes_no_other():
    # x could grow to 4 GPUs; without the rule the round moves it onto a1:2 + a2:2,
    # a new placement on the drained a1 that Slurm would never start
    running = job("x", LONG, demands=(2, 4), current=on("a1", 2))
    waiting = job("y", LONG)
    drained = {"a1": NodeClosing.drained(NOW, move=False)}
    for fragment in (False, True):
        result = step(running, waiting, closing=drained, fragment=fragment, capacity={"a1": 2})
        assert not result.plan.move and not result.plan.preempt
        assert nodes_of(result, "x") == {"a1"}
        assert "a1" not in nodes_of(result, "y")


def test_on_drain_move_moves_the_job_off_at_the_next_round():
    running = job("x", LONG, current=on("a1", 2))
    result = step(running, closing={"a1": NodeClosing.drained(NOW, move=True)}, capacity={"a1": 2})
    assert [a.job_id for a in result.plan.move] == ["x"]
    assert nodes_of(result, "x") == {"a2"}


def test_a_job_that_would_outlast_a_reservation_moves_once_its_notice_is_due():
    running = job("x", LONG, current=on("a1", 2))
    soon = {"a1": NodeClosing(NOW + 300.0, NOW - 1.0)}
    result = step(running, closing=soon)
    assert [a.job_id for a in result.plan.move] == ["x"] and nodes_of(result, "x") == {"a2"}
    later = {"a1": NodeClosing(NOW + 3000.0, NOW + 1000.0)}
    assert not step(running, closing=later).plan.move  # not due yet: it stays


def test_a_job_that_ends_before_the_reservation_stays():
    running = job("x", SHORT, current=on("a1", 2))
    result = step(running, closing={"a1": NodeClosing(NOW + 3000.0, NOW - 1.0)})
    assert not result.plan.move and not result.plan.preempt


def test_only_jobs_that_finish_before_the_reservation_start_on_its_nodes():
    # a2 is taken by another user: the reserved a1 is the only room
    capacity = {"a2": 0}
    soon = {"a1": NodeClosing(NOW + 3000.0, NOW + 1000.0)}
    long_job, short_job = (
        job("long", LONG, time_limit_s=600.0),
        job("short", SHORT, time_limit_s=600.0),
    )
    result = step(long_job, short_job, closing=soon, capacity=capacity)
    assert nodes_of(result, "short") == {"a1"}
    assert nodes_of(result, "long") == set()
    fragment = step(long_job, short_job, closing=soon, capacity=capacity, fragment=True)
    assert nodes_of(fragment, "short") == {"a1"} and nodes_of(fragment, "long") == set()


def test_node_closings_take_drains_and_the_earliest_reservation_not_over():
    windows = [
        Window(NOW + 500.0, NOW + 900.0, ("a1", "a2")),
        Window(NOW + 100.0, NOW + 200.0, ("a2",)),
        Window(NOW - 500.0, NOW - 1.0, ("b1",)),  # over
    ]
    found = node_closings(NOW, ["d1"], windows, move_on_drain=False, notice_s=60.0)
    assert found == {
        "d1": NodeClosing(math.inf, math.inf),
        "a1": NodeClosing(NOW + 500.0, NOW + 440.0),
        "a2": NodeClosing(NOW + 100.0, NOW + 40.0),
    }
    moving = node_closings(NOW, ["d1"], [], move_on_drain=True, notice_s=60.0)
    assert moving == {"d1": NodeClosing(NOW, NOW)}


def test_slurm_launches_no_start_whose_time_limit_reaches_into_the_reservation():
    capacity = {"a2": 0}
    soon = {"a1": NodeClosing(NOW + 3000.0, NOW + 1000.0)}
    for limit in (None, 3600.0):  # unlimited, or past the start: Slurm would never launch it
        result = step(job("short", SHORT, time_limit_s=limit), closing=soon, capacity=capacity)
        assert nodes_of(result, "short") == set()
    result = step(job("short", SHORT, time_limit_s=2900.0), closing=soon, capacity=capacity)
    assert nodes_of(result, "short") == {"a1"}
