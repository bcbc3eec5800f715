"""Admission: one rule, used by hops submit and by hopsd."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopsd.core.admission import admit, largest_config, runnable


def test_options_no_configuration_can_hold_are_dropped() -> None:
    got = admit((1, 2, 8, 16), 1000.0, 32, largest_config=8, max_demand=256)
    assert got.admitted and got.demands == (1, 2, 8)


@pytest.mark.parametrize(
    ("demands", "samples", "cap", "why"),
    [
        ((16,), 1000.0, 256, "exceeds the largest configuration"),
        ((1, 512), 1000.0, 256, "max_demand_gpus=256"),
        ((1,), 10.0, 256, "below one batch"),
        ((), 1000.0, 256, "no GPU counts"),
    ],
)
def test_refusals_say_why(demands: tuple[int, ...], samples: float, cap: int, why: str) -> None:
    got = admit(demands, samples, 32, largest_config=8, max_demand=cap)
    assert not got.admitted and why in got.refusal and got.demands == ()


@given(
    demands=st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True).map(sorted),
    samples=st.floats(1, 1e6),
    batch=st.integers(1, 512),
    largest=st.integers(0, 64),
)
def test_an_admitted_job_always_has_a_runnable_option(
    demands: list[int], samples: float, batch: int, largest: int
) -> None:
    got = admit(demands, samples, batch, largest_config=largest, max_demand=256)
    if got.admitted:
        assert got.demands and all(d <= largest for d in got.demands)
        assert samples >= batch


@pytest.mark.parametrize(("demands", "kept"), [((2, 8), (2,)), ((4,), (4,)), ((8, 16), ())])
def test_every_world_keeps_the_same_options(
    demands: tuple[int, ...], kept: tuple[int, ...]
) -> None:
    """Submit/adoption, the planner and the simulator apply one rule: a 4 + 4 GPU cluster
    of two types holds at most 4 GPUs of one type, whatever the total."""
    from two_types import CLUSTER, SETTINGS

    from hopsd.core.errors import InfeasibleDemandError
    from hopsd.core.model import Job
    from hopsd.core.rounds import plan_round
    from hopsd.core.snapshot import Snapshot
    from hopsd.plugins import get_policy
    from hopsd.sim.engine import Engine
    from hopsd.sim.engine_config import EngineConfig
    from hopsd.sim.truth import GroundTruth, ModelSpec
    from hopsd.sim.workload import JobSpec

    largest = largest_config(CLUSTER)
    assert largest == 4 and runnable(demands, largest) == kept
    assert admit(demands, 1e4, 32, largest_config=largest, max_demand=256).demands == kept
    snapshot = Snapshot(now=0.0, cluster=CLUSTER, jobs=(Job("j", demands, 1e4),))
    truth = GroundTruth(CLUSTER, {"m": ModelSpec("m", 1e3, 10, {"k80": 10.0, "a100": 40.0})})

    def simulate() -> object:
        jobs = [JobSpec("j", 0.0, demands, 1e4, "m")]
        return Engine(truth, jobs, get_policy("hops"), EngineConfig(settings=SETTINGS))

    if kept:
        plan_round(snapshot, SETTINGS)
        simulate()
        return
    with pytest.raises(InfeasibleDemandError):
        plan_round(snapshot, SETTINGS)
    with pytest.raises(InfeasibleDemandError):
        simulate()
