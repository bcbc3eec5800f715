"""Sia's workload format in: its workload CSV and placement profiles, converted to hops's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sim_helpers import assert_replays_under_every_policy

from hopsd.core.model import Configuration
from hopsd.sim.run import load_inputs
from hopsd.sim.sia_format import Placements, iterations_at, read_placements, read_sia_workload
from hopsd.sim.trace import TraceError

SIA = Path(__file__).resolve().parents[1] / "fixtures" / "sia"
CLUSTER = SIA / "cluster.toml"
WORKLOAD = SIA / "workload.csv"
TRACES = SIA / "traces"


def test_workload_rows_keep_sias_fields() -> None:
    jobs = read_sia_workload(WORKLOAD)
    assert [(j.name, j.time, j.application, j.num_replicas, j.batch_size) for j in jobs] == [
        ("cifar10-0", 0.0, "cifar10", 2, 256),
        ("imagenet-1", 30.0, "imagenet", 4, 400),
        ("cifar10-2", 95.0, "cifar10", 1, 128),
        ("imagenet-3", 200.0, "imagenet", 2, 200),
    ]
    assert {j.category for j in jobs} == {"adaptive"}  # no category column: Sia's default


def test_placements_are_read_whatever_the_column_order() -> None:
    rtx = read_placements(TRACES / "cifar10" / "placements-rtx.csv")
    aws = read_placements(TRACES / "cifar10" / "placements-aws.csv")
    assert sorted(rtx.rows) == ["1", "11", "2", "4"] and sorted(aws.rows) == ["1", "2", "4"]
    assert rtx.step_time("1", 64) == pytest.approx(0.058)
    assert rtx.step_time("1", 96) == pytest.approx((0.058 + 0.095) / 2)
    assert rtx.step_time("1", 256) == pytest.approx(0.095 * 2)  # beyond: per-sample rate
    assert rtx.step_time("8", 64) is None
    assert aws.min_local_bsz == 32


def test_jobs_run_the_validation_curve_at_their_batch() -> None:
    truth, jobs = load_inputs(None, CLUSTER, WORKLOAD, TRACES, 0, "sia")
    by_id = {j.job_id: j for j in jobs}
    # cifar10 at 256: between the curves of 128 (1172 iterations) and 512 (294)
    assert iterations_at({128: 1172.0, 512: 294.0}, 256, "x") == pytest.approx(
        (128 * 294 + 256 * 1172) / 384
    )
    assert by_id["cifar10-0"].total_samples == pytest.approx((128 * 294 + 256 * 1172) / 384 * 256)
    assert by_id["cifar10-2"].total_samples == pytest.approx(1172 * 128)
    # demands: 1, 2, 4, then multiples of the smallest node (4 GPUs on aws), as far as a
    # type can hold the job (256 // 32 = 8 GPUs)
    assert by_id["cifar10-0"].demands == (1, 2, 4, 8)
    # imagenet has no aws profile: it runs on rtx only, at most 400 // 50 = 8 GPUs
    assert by_id["imagenet-1"].demands == (1, 2, 4, 8)
    model = truth.model(by_id["imagenet-1"].model)
    assert model.batch_size == 100 and model.max_gpus == {"aws": 0, "rtx": 8}
    assert model.restore_s == 250.0  # Sia's checkpoint-restore time for imagenet


def test_converted_truth_reproduces_sias_step_times() -> None:
    truth, jobs = load_inputs(None, CLUSTER, WORKLOAD, TRACES, 0, "sia")
    imagenet = next(j.model for j in jobs if j.job_id == "imagenet-1")  # local batch 100
    one = Configuration.of("rtx", {"rtx00": 1})
    eight = Configuration.of("rtx", {"rtx00": 8})
    assert truth.throughput(imagenet, one) == pytest.approx(100 / 0.38, rel=1e-9)
    # the fitted all-reduce gives Sia's profiled eight-GPU step on one node
    assert truth.throughput(imagenet, eight) == pytest.approx(8 * 100 / 0.44, rel=1e-6)
    cifar = next(j.model for j in jobs if j.job_id == "cifar10-0")  # local batch 128
    aws_one = Configuration.of("aws", {"aws00": 1})
    assert truth.throughput(cifar, aws_one) == pytest.approx(128 / 0.160, rel=1e-9)


def test_the_truth_runs_sias_measured_placements_as_sia_measured_them() -> None:
    truth, jobs = load_inputs(None, CLUSTER, WORKLOAD, TRACES, 0, "sia")
    cifar = next(j.model for j in jobs if j.job_id == "cifar10-0")  # local batch 128
    model = truth.model(cifar)

    def rate(parts: dict[str, int]) -> float:
        return truth.throughput(cifar, Configuration.of("rtx", parts))

    assert rate({"rtx00": 2}) == pytest.approx(2 * 128 / 0.104)  # placement "2"
    assert rate({"rtx00": 4}) == pytest.approx(4 * 128 / 0.112)  # placement "4"
    # "11": two servers, profiled up to local batch 64, so its per-sample rate beyond;
    # the scalability file's two-server row for 2 GPUs gives way to the placement
    assert rate({"rtx00": 1, "rtx01": 1}) == pytest.approx(2 * 128 / (0.110 * 2))
    # 4 and 16 GPUs on two servers: no placement, the scalability file's rows
    assert rate({"rtx00": 2, "rtx01": 2}) == pytest.approx(4 * 128 / 0.150)
    assert rate({"rtx00": 3, "rtx01": 1}) == pytest.approx(4 * 128 / 0.150)
    assert model.measured("rtx", 8, 8) == pytest.approx(16 * 128 / 0.190)
    # 8 GPUs on one server: nobody measured it, the fitted all-reduce answers
    assert model.measured("rtx", 8) is None
    assert 4 * 128 / 0.112 < rate({"rtx00": 8}) < 8 * 128 / 0.095
    aws = {k: round(v, 6) for k, v in model.measured_throughput["aws"].items()}
    assert aws == {"2/1": round(2 * 128 / 0.172, 6), "4/1": round(4 * 128 / 0.181, 6)}
    assert set(model.measured_throughput["rtx"]) == {"2/1", "4/1", "2/2", "1+1", "4/2", "16/2"}


def test_a_sia_workload_replays_under_every_policy() -> None:
    assert_replays_under_every_policy(CLUSTER, WORKLOAD, TRACES, "sia", n_jobs=4)


def test_rigid_jobs_ask_exactly_their_replicas(tmp_path: Path) -> None:
    workload = tmp_path / "w.csv"
    workload.write_text(
        "name,time,application,num_replicas,batch_size,category\n"
        "a,0,cifar10,2,256,rigid\nb,5,cifar10,2,256,scale-gpus\n"
    )
    _, jobs = load_inputs(None, CLUSTER, workload, TRACES, 0, "sia")
    assert [j.demands for j in jobs] == [(2,), (1, 2, 4, 8)]


def test_bad_sia_inputs_are_named(tmp_path: Path) -> None:
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,2,4096\n")
    with pytest.raises(TraceError, match=r"job 'a'.*outside the validated batches \[128, 512\]"):
        load_inputs(None, CLUSTER, workload, TRACES, 0, "sia")
    workload.write_text("name,time,application,num_replicas\na,0,cifar10,2\n")
    with pytest.raises(TraceError, match="needs the columns batch_size"):
        read_sia_workload(workload)
    workload.write_text("name,time,application,num_replicas,batch_size\na,x,cifar10,2,256\n")
    with pytest.raises(TraceError, match="line 2: time must be a number"):
        read_sia_workload(workload)
    workload.write_text("name,time,application,num_replicas,batch_size\na,0,bert,2,256\n")
    with pytest.raises(TraceError, match="no profiles for application 'bert'"):
        load_inputs(None, CLUSTER, workload, TRACES, 0, "sia")
    traces = tmp_path / "traces"
    shutil.copytree(TRACES, traces)
    (traces / "cifar10" / "placements-rtx.csv").write_text(
        "local_bsz,step_time,sync_time,placement\n32,0.04,0.0,1x\n"
    )
    with pytest.raises(TraceError, match="placement must list GPUs per node"):
        load_inputs(None, CLUSTER, WORKLOAD, traces, 0, "sia")
    shutil.copy(TRACES / "cifar10" / "placements-rtx.csv", traces / "cifar10")
    (traces / "cifar10" / "scalability-rtx.csv").write_text(
        "local_bsz,step_time,sync_time,num_nodes,num_replicas\n32,0.1,0.05,4,2\n"
    )
    with pytest.raises(TraceError, match=r"scalability-rtx\.csv line 2: num_nodes"):
        load_inputs(None, CLUSTER, WORKLOAD, traces, 0, "sia")
    assert isinstance(read_placements(TRACES / "imagenet" / "placements-rtx.csv"), Placements)
