"""Gavel's trace format in: its .trace lines and throughputs JSON, converted to hops's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sim_helpers import assert_replays_under_every_policy, cluster_toml

from hopsd.core.model import Configuration
from hopsd.core.settings import Settings
from hopsd.plugins import get_policy
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.gavel_format import batch_of, fitted_comm_s, read_gavel_trace
from hopsd.sim.run import load_inputs
from hopsd.sim.trace import TraceError
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec

CLUSTER = cluster_toml(
    {
        "v100": {"b_link": 4e9, "b_net": 1e9, "speed": 3.0},
        "k80": {"b_link": 2e9, "b_net": 1e9, "speed": 1.0},
    },
    ("v", 1, "v100", 4),
    ("k", 2, "k80", 4),
)

# Gavel's format: job_type, command, working_directory, num_steps_arg, needs_data_dir,
# total_steps, scale_factor, [mode,] priority_weight, SLO, arrival_time (tab-separated).
TRACE = "\n".join(
    [
        "\t".join(("ResNet-18 (batch size 64)", "python3 main.py", "cifar10", "--num_steps", "1"))
        + "\t3000\t4\t1\t-1\t0",
        "\t".join(["A3C", "python3 main.py", "a3c", "--max-steps", "0", "2000", "1"])
        + "\tstatic\t1\t-1\t120",
    ]
)

THROUGHPUTS = {
    "v100": {
        "('ResNet-18 (batch size 64)', 1)": {"null": 10.0, "('A3C', 1)": [5.0, 4.0]},
        "('ResNet-18 (batch size 64)', 2)": {"null": 18.0},
        "('ResNet-18 (batch size 64)', 4)": {"null": 30.0},
        "('A3C', 1)": {"null": 5.0},
    },
    "k80": {
        "('ResNet-18 (batch size 64)', 1)": {"null": 3.0},
        "('A3C', 1)": {"null": 2.0},
    },
}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(CLUSTER)
    trace = tmp_path / "jobs.trace"
    trace.write_text(TRACE + "\n")
    thr = tmp_path / "throughputs.json"
    thr.write_text(json.dumps(THROUGHPUTS))
    return cluster, trace, thr


def test_trace_lines_become_rigid_jobs_sized_in_samples(files: tuple[Path, Path, Path]) -> None:
    jobs = read_gavel_trace(files[1])
    assert [(j.model, j.demands, j.submit_time, j.total_samples) for j in jobs] == [
        ("ResNet-18 (batch size 64)", (4,), 0.0, 3000.0 * 64),
        ("A3C", (1,), 120.0, 2000.0),
    ]
    assert batch_of("Transformer (batch size 128)") == 128 and batch_of("CycleGAN") == 1


def test_converted_truth_reproduces_gavels_throughputs(files: tuple[Path, Path, Path]) -> None:
    cluster, trace, thr = files
    truth, _ = load_inputs(None, cluster, trace, thr, 0, "gavel")
    resnet = "ResNet-18 (batch size 64)"
    one_v = Configuration.of("v100", {"v00": 1})
    one_k = Configuration.of("k80", {"k00": 1})
    four_v = Configuration.of("v100", {"v00": 4})
    # samples/s = Gavel's steps/s times the batch of the job type
    assert truth.throughput(resnet, one_v) == pytest.approx(10.0 * 64, rel=1e-9)
    assert truth.throughput(resnet, one_k) == pytest.approx(3.0 * 64, rel=1e-9)
    # the fitted all-reduce gives Gavel's measured 4-GPU throughput on one server
    assert truth.throughput(resnet, four_v) == pytest.approx(30.0 * 64, rel=1e-6)
    assert truth.throughput("A3C", one_k) == pytest.approx(2.0, rel=1e-9)


def test_fitted_comm_inverts_the_iteration_time() -> None:
    assert fitted_comm_s(1.0, 1.0) == 0.0  # linear scaling: nothing to communicate
    assert fitted_comm_s(1.0, 1.2) == 0.0  # super-linear: clipped at zero
    # efficiency 1/1.1: iteration 1.1 s = 0.4 s (forward + update) + 0.6 + 0.2 * t_c
    assert fitted_comm_s(1.0, 1 / 1.1) == pytest.approx(0.5)
    # efficiency 0.8: 1.25 s = 0.4 + t_c (the all-reduce outlasts backward)
    assert fitted_comm_s(1.0, 0.8) == pytest.approx(0.85)


def test_a_gavel_trace_replays_under_every_policy(files: tuple[Path, Path, Path]) -> None:
    cluster, trace, thr = files
    assert_replays_under_every_policy(cluster, trace, thr, "gavel", n_jobs=2)


@pytest.mark.parametrize(
    ("line", "message"),
    [("A3C\tcmd\tdir\t--n\t0\tmany\t1\t1\t-1\t0\n", "line 1"), ("A3C\tcmd\n", "10 or 11")],
)
def test_bad_gavel_trace_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    trace = tmp_path / "jobs.trace"
    trace.write_text(line)
    with pytest.raises(TraceError, match=message):
        read_gavel_trace(trace)


def test_a_worker_type_without_throughputs_is_named(files: tuple[Path, Path, Path]) -> None:
    cluster, trace, thr = files
    thr.write_text(json.dumps({"v100": THROUGHPUTS["v100"]}))
    with pytest.raises(TraceError, match="no worker type"):
        load_inputs(None, cluster, trace, thr, 0, "gavel")


GAVEL = Path(__file__).parents[1] / "fixtures" / "gavel"


def gavels_inputs() -> tuple[GroundTruth, list[JobSpec]]:
    """Gavel's own trace and throughputs, read as ``hops simulate --trace-format gavel`` does."""
    return load_inputs(
        None,
        GAVEL / "cluster.toml",
        GAVEL / "max_min_fairness.trace",
        GAVEL / "throughputs.json",
        0,
        "gavel",
    )


def gavels_table() -> dict[str, Any]:
    """Gavel's throughputs JSON as Gavel wrote it: steps/s per type, (job type, scale)."""
    return json.loads((GAVEL / "throughputs.json").read_text())  # type: ignore[no-any-return]


def test_every_job_of_gavels_trace_runs_alone_as_long_as_gavels_table_says() -> None:
    # Gavel's own trace and throughputs on 16 one-GPU servers per type: a job of scale
    # factor n runs total_steps / (Gavel's steps/s for (job type, n)) on n GPUs of any
    # type, spread over n servers (Gavel measured, and simulates, no placement).
    truth, jobs = gavels_inputs()
    table = gavels_table()
    lines = (GAVEL / "max_min_fairness.trace").read_text().splitlines()
    by_id = {j.job_id: j for j in jobs}
    checked = set()
    for number, line in enumerate(lines, start=1):
        fields = line.split("\t")
        job_type, steps, scale = fields[0], int(fields[5]), int(fields[6])
        job = by_id[f"g{number:05d}"]
        for gpu_type in ("v100", "p100", "k80"):
            servers = [n.id for n in truth.cluster.nodes_of_type(gpu_type)][:scale]
            cfg = Configuration.of(gpu_type, dict.fromkeys(servers, 1))
            gavels = table[gpu_type][f"('{job_type}', {scale})"]["null"]
            if gavels == 0:  # Gavel cannot run it there (ResNet-50, batch 128, on k80s)
                assert truth.model(job.model).max_gpus[gpu_type] < scale
                continue
            ours = job.total_samples / truth.throughput(job.model, cfg)
            assert ours == pytest.approx(steps / gavels, rel=1e-9), (number, gpu_type)
            checked.add((gpu_type, scale))
    assert len(checked) == 9
    assert truth.model("ResNet-50 (batch size 128)").max_gpus == {"k80": 1}


def test_the_scheduler_is_not_told_gavels_scaling() -> None:
    # The estimator sees the model's single-GPU figures and fitted parameter count only:
    # with one-GPU servers nothing is fitted, so it first expects linear scaling and
    # learns Gavel's by measuring.
    truth, _ = gavels_inputs()
    model = truth.model("ResNet-50 (batch size 64)")
    assert model.params == 0.0
    assert model.measured("v100", 4) is not None
    assert model.measured("v100", 4) < 0.8 * 4 * model.throughput["v100"]


def test_a_multi_gpu_job_alone_in_the_simulator_runs_as_long_as_in_gavels() -> None:
    # End to end: the engine runs each 4-GPU job type of the trace alone (no profiling,
    # free restarts), spread over four one-GPU servers, as long as Gavel's table says.
    truth, jobs = gavels_inputs()
    table = gavels_table()
    config = EngineConfig(settings=Settings(restart_penalty_s=0.0), profile_s=0.0)
    one_per_type = {j.model: j for j in jobs if j.demands == (4,)}
    assert len(one_per_type) >= 5
    for job in one_per_type.values():
        engine = Engine(truth, [job], get_policy("fifo"), config)
        engine.run()
        done = engine.jobs[0]
        (gpu_type,) = done.types_used
        steps = job.total_samples / batch_of(job.model)
        gavels = steps / table[gpu_type][f"('{job.model}', 4)"]["null"]
        assert done.run_time == pytest.approx(gavels, rel=1e-9), job.model
