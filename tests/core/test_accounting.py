"""The one rule that charges a job's time: service on GPUs, wait off them, nothing else."""

from __future__ import annotations

import pytest

from hopsd.core.accounting import Charge, Clock, charge, clock_of
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
