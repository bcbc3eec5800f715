"""Ground-truth model: calibration against the paper's figures and the slowest-node rule."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_helpers import TINY_CLUSTER, TOY_MODELS, tiny_truth

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Configuration
from hopsd.sim.cluster_file import load_cluster, parse_cluster
from hopsd.sim.profiles import ProfileFileError, parse_profiles, with_aliases
from hopsd.sim.run import build_truth, preset_path
from hopsd.sim.truth import GroundTruth


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


def test_a_larger_batch_amortises_the_all_reduce(paper64) -> None:
    # VGG11 (133 M parameters) over two TitanXP hosts: communication is per iteration,
    # compute and data per sample, so four times the model's batch (32) runs faster.
    nodes = [n.id for n in paper64.cluster.nodes_of_type("TitanXP")][:2]
    cfg = Configuration.of("TitanXP", {nodes[0]: 4, nodes[1]: 4})
    default = paper64.throughput("vgg11", cfg)
    assert paper64.throughput("vgg11", cfg, batch_size=32) == default
    assert paper64.throughput("vgg11", cfg, batch_size=128) > 1.2 * default


def test_the_engine_runs_a_job_at_its_trace_batch(paper64) -> None:
    # The same job with and without a trace batch size: the true rate follows the batch.
    from hopsd.plugins import get_policy
    from hopsd.sim.engine import Engine
    from hopsd.sim.workload import JobSpec

    rates = {}
    for batch in (None, 128):
        spec = JobSpec("j", 0.0, (16,), 1e5, "vgg11", batch_size=batch)
        engine = Engine(paper64, [spec], get_policy("fifo"))
        engine.run()
        assert engine.jobs[0].finish_time is not None
        rates[batch] = engine.jobs[0].spec.total_samples / engine.jobs[0].run_time
    assert rates[128] > 1.2 * rates[None]


# "toy" measured on "slow": 6 samples/s per GPU on 2 GPUs (about 9 on one GPU), 4 on two
# servers, 5 on 3 GPUs, 2 with 3 GPUs on one server and 1 on another.
MEASURED = {
    "models": {
        "toy": {
            **TOY_MODELS["models"]["toy"],
            "data_ms_per_sample": 50.0,
            "measured_throughput": {"slow": {"2": 12.0, "3": 15.0, "2/2": 8.0, "1+3": 8.0}},
        }
    }
}


def _measured_truth(data_factors: dict[str, float] | None = None) -> GroundTruth:
    sim = parse_cluster(TINY_CLUSTER, "tiny", seed=0)
    return GroundTruth(sim.cluster, parse_profiles(MEASURED), data_factors or {})


def test_measured_counts_run_as_measured() -> None:
    truth = _measured_truth()
    spread = Configuration.of("slow", {"s00": 1, "s01": 1})
    packed = Configuration.of("slow", {"s00": 2})
    assert truth.throughput("toy", spread) == pytest.approx(8.0)  # measured on two servers
    assert truth.throughput("toy", packed) == pytest.approx(12.0)  # any other placement
    three = Configuration.of("slow", {"s00": 2, "s01": 1})
    assert truth.throughput("toy", three) == pytest.approx(15.0)
    four = Configuration.of("slow", {"s00": 1, "s01": 3})
    assert truth.throughput("toy", four) == pytest.approx(8.0)  # that very placement
    # a count nobody measured, and another type, keep the communication model
    four = Configuration.of("slow", {"s00": 4})
    fast = Configuration.of("fast", {"f00": 2})
    toy = {k: v for k, v in MEASURED["models"]["toy"].items() if k != "measured_throughput"}
    plain = GroundTruth(truth.cluster, parse_profiles({"models": {"toy": toy}}))
    assert plain.throughput("toy", packed) > 15.0
    for cfg in (four, fast):
        assert truth.throughput("toy", cfg) == plain.throughput("toy", cfg)


def test_a_slow_host_slows_a_measured_count_as_it_slows_one_gpu() -> None:
    truth = _measured_truth({"s01": 3.0})
    one_gpu_ratio = truth.single_gpu("toy", "slow", 3.0) / truth.single_gpu("toy", "slow")
    assert one_gpu_ratio < 0.9
    both = Configuration.of("slow", {"s00": 1, "s01": 1})
    assert truth.node_rates("toy", both) == pytest.approx((4.0, 4.0 * one_gpu_ratio))
    assert truth.throughput("toy", both) == pytest.approx(8.0 * one_gpu_ratio)


def test_bad_measured_tables_are_refused() -> None:
    toy = dict(MEASURED["models"]["toy"])
    for table, match in (
        ({"slow": {"1": 10.0}}, "2 GPUs or more"),
        ({"slow": {"1/1": 10.0}}, "2 GPUs or more"),
        ({"slow": {"two": 10.0}}, "is not N"),
        ({"slow": {"2/3": 10.0}}, "more servers than GPUs"),
        ({"slow": {"2/0": 10.0}}, "is not N"),
        ({"slow": {"2+0": 10.0}}, "is not N"),
        ({"slow": {"2/1/1": 10.0}}, "is not N"),
        ({"slow": {"2": 0}}, "positive"),
        ({"slow": 18.0}, "table of placement"),
    ):
        with pytest.raises(ProfileFileError, match=match):
            parse_profiles({"models": {"toy": {**toy, "measured_throughput": table}}})
    spec = parse_profiles(MEASURED)["toy"]
    assert spec.measured_throughput["slow"] == {"2": 12.0, "3": 15.0, "2/2": 8.0, "3+1": 8.0}
    with pytest.raises(InvalidInputError, match="write '3\\+1'"):
        replace(spec, measured_throughput={"slow": {"1+3": 8.0}})


def test_an_alias_type_scales_on_its_own_links() -> None:
    models = with_aliases(parse_profiles(MEASURED), {"slow2": "slow"})
    assert models["toy"].throughput["slow2"] == 10.0
    assert models["toy"].measured("slow", 2) == 12.0
    assert models["toy"].measured("slow", 1, 1) == 8.0
    assert models["toy"].measured("slow", 1, 3) == 8.0
    assert models["toy"].measured("slow", 2, 2) is None
    assert models["toy"].measured("slow2", 2) is None
