"""Ground-truth model: calibration against the paper's figures and the slowest-node rule."""

from __future__ import annotations

import pytest
from sim_helpers import tiny_truth

from hopsd.core.model import Configuration
from hopsd.sim.cluster_file import load_cluster
from hopsd.sim.run import build_truth, preset_path


@pytest.fixture(scope="module")
def paper64():
    return build_truth(load_cluster(preset_path("paper-64.toml"), seed=0))


def test_resnet50_per_type_matches_figure_1(paper64) -> None:
    assert paper64.single_gpu("resnet50", "GTX1080Ti") == pytest.approx(58, rel=0.05)
    assert paper64.single_gpu("resnet50", "TitanXP") == pytest.approx(65, rel=0.05)
    assert paper64.single_gpu("resnet50", "RTX3090") == pytest.approx(192, rel=0.05)
    # The same GPU in an older host is data-loading bound.
    assert paper64.single_gpu("resnet50", "RTX3090", data_factor=5.5) == pytest.approx(79, rel=0.1)


def test_distilbert_barely_feels_the_older_host(paper64) -> None:
    new = paper64.single_gpu("distilbert", "RTX3090")
    old = paper64.single_gpu("distilbert", "RTX3090", data_factor=5.5)
    assert new == pytest.approx(42, rel=0.05)
    assert 0.75 * new < old < new


def test_slowest_node_sets_the_pace() -> None:
    truth = tiny_truth()
    truth.data_factors = {"s00": 1.0, "s01": 1.0}
    both = Configuration.of("slow", {"s00": 2, "s01": 2})
    rates = truth.node_rates("toy", both)
    assert truth.throughput("toy", both) == pytest.approx(min(rates) * 4)


def test_older_host_in_a_distributed_config_drags_it_down(paper64) -> None:
    old = paper64.cluster.nodes_of_type("RTX3090")[0].id  # rtx3090-old-00
    new = paper64.cluster.nodes_of_type("RTX3090")[2].id
    mixed = Configuration.of("RTX3090", {old: 4, new: 4})
    only_new = Configuration.of("RTX3090", {new: 4})
    per_gpu_mixed = paper64.throughput("resnet50", mixed) / 8
    per_gpu_new = paper64.throughput("resnet50", only_new) / 4
    assert per_gpu_mixed < 0.6 * per_gpu_new
