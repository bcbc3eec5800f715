"""Live checks of the Slurm test cluster started by ``docker/cluster.sh up``.

Everything else that talks to real Slurm assumes this layout: typed fake GPUs
per node, one partition per GPU generation, CUDA_VISIBLE_DEVICES handed to
jobs, a per-node speed factor, and accounting answering ``sacct``. When one of
these breaks, these tests say so directly instead of a scheduler test failing
in a puzzling way.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        "SLURM_CONF" not in os.environ,
        reason="SLURM_CONF is not set: start the cluster with "
        'eval "$(docker/cluster.sh up | grep ^export)"',
    ),
]

COMMAND_TIMEOUT_S = 15
JOB_DEADLINE_S = 30

# node -> (GPU type, GPU count), as declared in docker/conf/slurm.conf.in.
EXPECTED_NODES = {
    "k80n1": ("k80", 2),
    "v100n1": ("v100", 4),
    "v100n2": ("v100", 4),
    "a100n1": ("a100", 4),
    "a100n2": ("a100", 4),
}
EXPECTED_PARTITIONS = {
    "k80": {"k80n1"},
    "v100": {"v100n1", "v100n2"},
    "a100": {"a100n1", "a100n2"},
    "all": set(EXPECTED_NODES),
    "hops": set(EXPECTED_NODES),  # plain jobs sent here become hops jobs (job_submit.lua)
}


@dataclass(frozen=True)
class Probe:
    """A pinned GPU job and what it should have been given."""

    partition: str
    node: str
    gpus: int


# The second node of a generation is the slow one, so it is worth probing.
PROBES = (
    Probe("k80", "k80n1", 2),
    Probe("v100", "v100n2", 3),
    Probe("a100", "a100n2", 1),
)

PROBE_SCRIPT = """#!/bin/sh
echo "CVD=${CUDA_VISIBLE_DEVICES:-}"
echo "NODE=${SLURMD_NODENAME:-}"
echo "SPEED=${HOPS_NODE_SPEED:-}"
echo "END=1"
"""


def run(*argv: str) -> str:
    """Run a Slurm command; a failure shows the command and its output."""
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, f"{' '.join(argv)} -> {done.returncode}: {done.stderr}"
    return done.stdout


def parse_env_lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def probe_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Submit every probe at once (faster than one by one) and collect outputs."""
    workdir = tmp_path_factory.mktemp("cluster_probe")
    workdir.chmod(0o777)
    script = workdir / "probe.sh"
    script.write_text(PROBE_SCRIPT)
    outputs: dict[str, Path] = {}
    for probe in PROBES:
        out = workdir / f"{probe.partition}.out"
        run(
            "sbatch", "--parsable", f"--partition={probe.partition}",
            f"--nodelist={probe.node}", f"--gres=gpu:{probe.gpus}",
            "--time=2", f"--output={out}", f"--chdir={workdir}", str(script),
        )  # fmt: skip
        outputs[probe.partition] = out
    deadline = time.monotonic() + JOB_DEADLINE_S
    results: dict[str, dict[str, str]] = {}
    while len(results) < len(outputs) and time.monotonic() < deadline:
        for partition, out in outputs.items():
            if out.exists() and "END=1" in out.read_text():
                results[partition] = parse_env_lines(out.read_text())
        time.sleep(0.3)
    return results


@pytest.fixture(scope="module")
def submitted_job_id(tmp_path_factory: pytest.TempPathFactory) -> str:
    workdir = tmp_path_factory.mktemp("cluster_sacct")
    workdir.chmod(0o777)
    return run(
        "sbatch", "--parsable", "--partition=all", "--gres=gpu:1",
        f"--output={workdir / 'sacct.out'}", f"--chdir={workdir}", "--wrap=true",
    ).strip().split(";")[0]  # fmt: skip


def test_every_node_is_up_with_its_gpu_type() -> None:
    lines = run("sinfo", "-h", "-N", "-o", "%N|%P|%T|%G").splitlines()
    seen: dict[str, tuple[str, int]] = {}
    partitions: dict[str, set[str]] = {}
    for line in lines:
        node, partition, state, gres = line.split("|")
        # Jobs of other live tests may be running or ending, so those states are fine.
        assert state in {"idle", "mixed", "allocated", "completing"}, f"{node} is {state}"
        _, gpu_type, count = gres.split("(")[0].split(":")
        seen[node] = (gpu_type, int(count))
        partitions.setdefault(partition.rstrip("*"), set()).add(node)
    assert seen == EXPECTED_NODES
    assert partitions == EXPECTED_PARTITIONS


def test_all_is_the_default_partition() -> None:
    defaults = [p for p in run("sinfo", "-h", "-o", "%P").split() if p.endswith("*")]
    assert defaults == ["all*"]


@pytest.mark.parametrize("probe", PROBES, ids=[p.partition for p in PROBES])
def test_pinned_job_gets_its_gpus(probe: Probe, probe_results: dict[str, dict[str, str]]) -> None:
    assert probe.partition in probe_results, f"job on {probe.node} did not finish in time"
    env = probe_results[probe.partition]
    assert env["NODE"] == probe.node
    devices = env["CVD"].split(",") if env["CVD"] else []
    assert len(devices) == probe.gpus
    assert all(d.isdigit() for d in devices)


@pytest.mark.parametrize("probe", PROBES, ids=[p.partition for p in PROBES])
def test_job_sees_the_speed_of_its_node(
    probe: Probe, probe_results: dict[str, dict[str, str]]
) -> None:
    speeds_file = Path(os.environ.get("HOPS_CLUSTER_DIR", "")) / "node-speed.json"
    if not speeds_file.is_file():
        pytest.skip("HOPS_CLUSTER_DIR is not set, node-speed.json not found")
    speeds = json.loads(speeds_file.read_text())
    assert probe.partition in probe_results, f"job on {probe.node} did not finish in time"
    assert float(probe_results[probe.partition]["SPEED"]) == speeds[probe.node]


def test_same_type_nodes_differ_in_speed() -> None:
    speeds_file = Path(os.environ.get("HOPS_CLUSTER_DIR", "")) / "node-speed.json"
    if not speeds_file.is_file():
        pytest.skip("HOPS_CLUSTER_DIR is not set, node-speed.json not found")
    speeds = json.loads(speeds_file.read_text())
    assert speeds["v100n2"] < speeds["v100n1"]
    assert speeds["a100n2"] < speeds["a100n1"]


def accounting_enabled() -> bool:
    config = run("scontrol", "show", "config")
    return "accounting_storage/slurmdbd" in config


def test_sacct_reports_a_finished_job(submitted_job_id: str) -> None:
    if not accounting_enabled():
        pytest.skip("cluster runs without slurmdbd (cluster.sh up said why)")
    deadline = time.monotonic() + JOB_DEADLINE_S
    fields: list[str] = []
    while time.monotonic() < deadline:
        out = run(
            "sacct", "-n", "-P", "-X", "-j", submitted_job_id,
            "-o", "JobID,State,ExitCode,AllocTRES",
        )  # fmt: skip
        fields = out.strip().split("|") if out.strip() else []
        if fields and fields[1] == "COMPLETED":
            break
        time.sleep(0.5)
    assert fields, f"sacct does not know job {submitted_job_id}"
    job_id, state, exit_code, tres = fields
    assert (job_id, state, exit_code) == (submitted_job_id, "COMPLETED", "0:0")
    assert "gres/gpu=1" in tres
