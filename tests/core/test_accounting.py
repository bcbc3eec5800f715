"""The one rule that charges a job's time: service on GPUs, wait off them, nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopsd.core.accounting import Charge, Clock, StatedRun, charge, charge_split, clock_of
from hopsd.core.errors import InvalidInputError

#: one job's life: (state, holds GPUs, seconds, GPUs, speed of their type)
LIFE = [
    ("queued", False, 5.0, 0, 1.0),      # submitted, waits
    ("profiling", True, 3.0, 1, 1.0),    # its run on a k80
    ("profiling", False, 2.0, 0, 1.0),   # waits for a v100 to profile on
    ("profiling", True, 3.0, 1, 2.0),    # its run on a v100
    ("queued", False, 4.0, 0, 1.0),      # profiling over, waits for the plan
    ("running", True, 60.0, 2, 4.0),     # two a100s
    ("preempted", False, 10.0, 0, 1.0),  # preempted for a job of higher priority
    ("running", True, 30.0, 4, 4.0),     # resumed on four
]  # fmt: skip


def totals(life: list[tuple[str, bool, float, int, float]]) -> Charge:
    wait = gpu_s = norm = 0.0
    for state, holds, dt, gpus, speed in life:
        cost = charge(clock_of(state, holds), dt, gpus, speed)
        wait, gpu_s, norm = wait + cost.wait_s, gpu_s + cost.service_gpu_s, norm + cost.service_norm
    return Charge(wait, gpu_s, norm)


def test_a_jobs_life_is_charged_wait_off_gpus_and_service_on_them() -> None:
    # a profiling run holds GPUs and trains the job: service, not waiting
    assert totals(LIFE) == Charge(
        wait_s=5 + 2 + 4 + 10,
        service_gpu_s=3 * 1 + 3 * 1 + 60 * 2 + 30 * 4,
        service_norm=3 * 1 * 1.0 + 3 * 1 * 2.0 + 60 * 2 * 4.0 + 30 * 4 * 4.0,
    )


@pytest.mark.parametrize(
    ("state", "holds", "clock"),
    [
        ("running", True, Clock.ON_GPUS),
        ("running", False, Clock.NONE),  # its placement not yet known: no guess
        ("profiling", True, Clock.ON_GPUS),
        ("profiling", False, Clock.WAITING),
        ("queued", False, Clock.WAITING),
        ("preempted", False, Clock.WAITING),
        ("requeued", False, Clock.WAITING),
        ("arriving", False, Clock.WAITING),  # the simulator's adoption delay
        ("done", False, Clock.NONE),
        ("submitted", False, Clock.NONE),
    ],
)
def test_the_clock_of_each_state(state: str, holds: bool, clock: Clock) -> None:
    assert clock_of(state, holds) is clock


def test_nonsense_intervals_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        charge(Clock.WAITING, -1.0)
    with pytest.raises(InvalidInputError):
        charge(Clock.ON_GPUS, 1.0, gpus=0)


def test_a_run_stated_inside_a_wait_splits_it_at_its_start_and_end() -> None:
    # waited since 100 s; Slurm says it ran on 2 GPUs of speed 4 from 103 s to 106 s
    cost = charge_split(Clock.WAITING, 100.0, 110.0, 0, 1.0, StatedRun(103.0, 106.0, 2, 4.0))
    assert cost == Charge(wait_s=3.0, service_gpu_s=6.0, service_norm=24.0)


def test_a_run_that_started_inside_a_wait_and_still_runs_is_served_until_now() -> None:
    cost = charge_split(Clock.WAITING, 100.0, 110.0, 0, 1.0, StatedRun(104.0, None, 1, 1.0))
    assert cost == Charge(wait_s=4.0, service_gpu_s=6.0, service_norm=6.0)


def test_a_run_that_ended_inside_the_interval_is_served_until_its_end_only() -> None:
    cost = charge_split(Clock.ON_GPUS, 100.0, 110.0, 4, 2.0, StatedRun(90.0, 102.5, 4, 2.0))
    assert cost == Charge(service_gpu_s=10.0, service_norm=20.0)


def test_a_start_stated_in_the_second_the_interval_began_counts_as_inside_it() -> None:
    # observed at 100.4 s; released then, it started at 100.6 s, stated as 100 s
    run = StatedRun(100.0, 103.0, 1, 1.0, resolution_s=1.0)
    cost = charge_split(Clock.WAITING, 100.4, 110.0, 0, 1.0, run)
    assert cost == Charge(
        wait_s=0.0, service_gpu_s=pytest.approx(2.6), service_norm=pytest.approx(2.6)
    )


def test_a_start_before_the_interval_is_a_past_runs_and_leaves_the_wait_whole() -> None:
    # requeued at 95 s, cancelled while pending: Slurm still states the old run's start
    cost = charge_split(Clock.WAITING, 100.0, 110.0, 0, 1.0, StatedRun(80.0, 108.0, 2, 1.0))
    assert cost == Charge(wait_s=10.0)


def test_without_a_stated_run_the_interval_is_charged_whole() -> None:
    assert charge_split(Clock.ON_GPUS, 0.0, 5.0, 2, 3.0, None) == charge(Clock.ON_GPUS, 5.0, 2, 3.0)
    with pytest.raises(InvalidInputError):
        charge_split(Clock.WAITING, 10.0, 5.0, 0, 1.0, None)


@given(
    since=st.floats(0, 1e6),
    dt=st.floats(0, 1e5),
    start=st.floats(0, 1.1e6),
    length=st.one_of(st.none(), st.floats(0, 1e5)),
    clock=st.sampled_from(list(Clock)),
    gpus=st.integers(1, 8),
)
def test_a_split_never_charges_more_time_than_the_interval(
    since: float, dt: float, start: float, length: float | None, clock: Clock, gpus: int
) -> None:
    now = since + dt
    end = None if length is None else start + length
    cost = charge_split(clock, since, now, gpus, 1.0, StatedRun(min(start, now), end, gpus, 1.0))
    assert cost.wait_s >= 0 and cost.service_gpu_s >= 0
    assert cost.wait_s + cost.service_gpu_s / gpus <= (now - since) * (1 + 1e-9) + 1e-6
