"""Placement sensitivity, eq. 10: rho = thr({a:1}) / per-GPU thr({a:1, b:1})."""

from __future__ import annotations

import math

import pytest

from hopsd.core.estimator import Estimator
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.sensitivity import (
    is_high_sensitivity,
    mean_finite,
    probe_nodes,
    sensitivity_on,
)
from hopsd.core.settings import Settings
from hopsd.core.throughput import InMemoryThroughputStore


def cluster() -> Cluster:
    return Cluster.build(
        [GpuType("v100"), GpuType("k80")],
        [Node("k0", "k80", 4), Node("a", "v100", 4), Node("b", "v100", 4), Node("k1", "k80", 0)],
    )


JOB = Job(id="j", demands=(1, 2), total_samples=1e6)


def rho_of(job: Job, gpu_type: str, estimator: Estimator, where: Cluster) -> float:
    """Eq. 10 for ``job`` on ``gpu_type``, as planning asks it: on the type's probe hosts."""
    return sensitivity_on(job, gpu_type, probe_nodes(where, gpu_type), estimator)


@pytest.mark.parametrize(
    ("split", "expected", "high"),
    [(50.0, 100.0 / 50.0, True), (80.0, 1.25, False)],
    ids=["high-above-sigma", "low-below-sigma"],
)
def test_rho_is_single_gpu_throughput_over_split_per_gpu_throughput(
    split: float, expected: float, high: bool
) -> None:
    store = InMemoryThroughputStore()
    store.set_type_aggregated("j", "v100", 1, 100.0)
    store.set_type_distributed("j", "v100", 2, split)
    est = Estimator(cluster(), store, Settings())
    rho = rho_of(JOB, "v100", est, cluster())
    assert rho == pytest.approx(expected)
    assert is_high_sensitivity(rho, 1.4) is high


def test_entity_knowledge_of_the_probe_hosts_is_used() -> None:
    store = InMemoryThroughputStore()
    store.set_entity_aggregated("j", "a", 1, 120.0)
    store.set_entity_distributed("j", "a", 2, 60.0)
    store.set_type_distributed("j", "v100", 2, 70.0)
    est = Estimator(cluster(), store, Settings())
    # split per-GPU = slowest of a (entity 60) and b (type 70) = 60 -> 120 / 60
    assert rho_of(JOB, "v100", est, cluster()) == pytest.approx(2.0)


def test_probe_hosts_are_the_first_two_nodes_with_gpus_of_the_type() -> None:
    assert probe_nodes(cluster(), "v100") == ("a", "b")
    assert probe_nodes(cluster(), "k80") is None  # k1 has no GPUs


def test_single_node_type_counts_as_infinitely_sensitive_and_is_left_out_of_means() -> None:
    store = InMemoryThroughputStore()
    store.set_type_aggregated("j", "v100", 1, 90.0)
    store.set_type_distributed("j", "v100", 2, 60.0)
    est = Estimator(cluster(), store, Settings())
    assert rho_of(JOB, "k80", est, cluster()) == math.inf
    both = [rho_of(JOB, t, est, cluster()) for t in ("v100", "k80")]
    assert mean_finite(both) == pytest.approx(1.5)


def test_mean_finite_skips_infinities() -> None:
    assert mean_finite([1.0, math.inf, 2.0]) == pytest.approx(1.5)
    assert mean_finite([math.inf]) == 0.0


def test_rho_is_eq_10_on_the_probe_configurations() -> None:
    """Per node, the probes agree with the estimates of the configurations eq. 10 names:
    ``thr({a: 1}) / per-GPU thr({a: 1, b: 1})``, whichever layer knows each node."""
    store = InMemoryThroughputStore()
    store.set_entity_aggregated("j", "a", 1, 120.0)
    store.set_type_aggregated("j", "v100", 1, 110.0)
    store.set_entity_distributed("j", "b", 2, 45.0)  # b is the slower host split
    store.set_type_distributed("j", "v100", 2, 70.0)
    est = Estimator(cluster(), store, Settings())
    alone = est.throughput(JOB, Configuration("v100", (("a", 1),)))
    split = est.throughput(JOB, Configuration.of("v100", {"a": 1, "b": 1}))
    assert rho_of(JOB, "v100", est, cluster()) == alone.samples_per_s / split.per_gpu
    assert alone.samples_per_s / split.per_gpu == pytest.approx(120.0 / 45.0)
