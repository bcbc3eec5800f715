"""Validation of the core's plain data: bad input raises typed errors with clear messages."""

from __future__ import annotations

import pytest

from hopsd.core.errors import InvalidInputError, UnknownGpuTypeError
from hopsd.core.model import Assignment, Cluster, Configuration, GpuType, Job, Node, Plan
from hopsd.core.snapshot import Snapshot


def small_cluster() -> Cluster:
    return Cluster.build(
        [GpuType("k80"), GpuType("v100", speed=2.0)],
        [Node("k1", "k80", 4), Node("v1", "v100", 8), Node("v2", "v100", 8)],
    )


def test_type_fractions_follow_gpu_counts() -> None:
    fractions = small_cluster().type_fractions()
    assert fractions == {"k80": 4 / 20, "v100": 16 / 20}


def test_unknown_gpu_type_on_node_is_rejected() -> None:
    with pytest.raises(UnknownGpuTypeError, match="a100"):
        Cluster.build([GpuType("k80")], [Node("n1", "a100", 4)])


def test_negative_gpus_rejected() -> None:
    with pytest.raises(InvalidInputError, match="negative GPU count"):
        Node("n1", "k80", -1)


@pytest.mark.parametrize(
    ("demands", "message"),
    [((), "empty demand set"), ((0, 2), "positive"), ((4, 2), "strictly increasing")],
)
def test_bad_demand_sets_rejected(demands: tuple[int, ...], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Job("j1", demands, total_samples=1000)


def test_configuration_rejects_zero_gpus_and_duplicates() -> None:
    with pytest.raises(InvalidInputError):
        Configuration("k80", (("k1", 0),))
    with pytest.raises(InvalidInputError):
        Configuration("k80", (("k1", 1), ("k1", 2)))


def test_configuration_equality_ignores_mapping_order() -> None:
    a = Configuration.of("v100", {"v2": 4, "v1": 2})
    b = Configuration.of("v100", {"v1": 2, "v2": 4})
    assert a == b
    assert a.total_gpus == 6 and a.distributed and a.n_nodes == 2


def test_plan_gpus_used_sums_every_placement() -> None:
    plan = Plan(
        start=(Assignment("a", Configuration.of("v100", {"v1": 2})),),
        keep=(Assignment("b", Configuration.of("v100", {"v1": 4, "v2": 8})),),
    )
    assert plan.gpus_used() == {"v1": 6, "v2": 8}


def test_snapshot_rejects_capacity_above_node_size() -> None:
    with pytest.raises(InvalidInputError, match="outside"):
        Snapshot(now=0.0, cluster=small_cluster(), jobs=(), capacity={"k1": 5})


def test_snapshot_rejects_duplicate_jobs() -> None:
    job = Job("j1", (1,), total_samples=10)
    with pytest.raises(InvalidInputError, match="twice"):
        Snapshot(now=0.0, cluster=small_cluster(), jobs=(job, job))
