"""How faithfully ``--trace-format sia`` reproduces Sia's own profiles.

Sia's simulator runs a job of total batch B on a placement it profiled at
``B / step_time`` samples/s, ``step_time`` that placement's at the local batch
``ceil(B / GPUs)``. This script reads a Sia workload and traces directory
through hops's importer and sets each job's isolated run time in the
simulator's truth (alone, its ``num_replicas`` GPUs of a type packed onto as
few servers as hold them, no restarts) beside Sia's on the same placement,
wherever Sia profiled that placement: the ratio hops / Sia per type and GPU
count (1.000 is exact; hops keeps the per-GPU batch, so a batch that does not
divide evenly runs ``B / (GPUs x ceil(B / GPUs))`` as long). It then replays
the workload under the given policies and prints their average JCT.

    .venv/bin/python benchmarks/sia_fidelity.py [--cluster F --workload F --profiles DIR]
        [--sim-config F] [--policies fifo,gavel] [--json]

Defaults: the small workload of ``tests/fixtures/sia``. Sia's own workloads and
traces are in its SOSP '23 artifact (``sia-simulator/workloads``, ``traces``).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

from fidelity_report import add_run_options, simulate_and_print

from hopsd.core.model import Configuration
from hopsd.sim.knobs import SimKnobs, load_knobs
from hopsd.sim.run import load_inputs
from hopsd.sim.sia_format import SiaJob, read_placements, read_sia_workload
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sia"


def packed(truth: GroundTruth, gpu_type: str, gpus: int) -> dict[str, int] | None:
    """``gpus`` GPUs of the type on as few servers as hold them (None: too few)."""
    parts: dict[str, int] = {}
    for node in sorted(truth.cluster.nodes_of_type(gpu_type), key=lambda n: (-n.gpus, n.id)):
        if gpus <= 0:
            break
        parts[node.id] = min(node.gpus, gpus)
        gpus -= parts[node.id]
    return parts if gpus <= 0 else None


def sia_shape(parts: dict[str, int]) -> str:
    """Sia's name of a placement: GPUs per server, its smallest rotation."""
    shape = "".join(str(g) for g in sorted(parts.values(), reverse=True))
    return min(shape[i:] + shape[:i] for i in range(len(shape)))


def run_time_ratios(cluster: Path, workload: Path, profiles: Path) -> dict[str, list[float]]:
    """``"<type> x<GPUs>"`` -> each job's isolated run time in hops's truth over Sia's."""
    truth, jobs = load_inputs(None, cluster, workload, profiles, 0, "sia")
    rows = {r.name: r for r in read_sia_workload(workload)}
    out: dict[tuple[str, int], list[float]] = defaultdict(list)
    for job in jobs:
        row = rows[job.job_id]
        for gpu_type in sorted(truth.cluster.gpu_types):
            ratio = _ratio(truth, job, row, gpu_type, profiles)
            if ratio is not None:
                out[(gpu_type, row.num_replicas)].append(ratio)
    return {f"{t} x{n}": v for (t, n), v in sorted(out.items())}


def _ratio(
    truth: GroundTruth, job: JobSpec, row: SiaJob, gpu_type: str, profiles: Path
) -> float | None:
    """The job's run time on its packed placement of the type, hops / Sia (None: Sia has
    not profiled that placement, or the job cannot use that many GPUs of the type)."""
    gpus, batch = row.num_replicas, row.batch_size
    if truth.model(job.model).max_gpus.get(gpu_type, 0) < gpus:
        return None
    parts = packed(truth, gpu_type, gpus)
    table = profiles / row.application / f"placements-{gpu_type}.csv"
    if parts is None or not table.is_file():
        return None
    step = read_placements(table).step_time(sia_shape(parts), math.ceil(batch / gpus))
    if step is None:
        return None
    ours = job.total_samples / truth.throughput(job.model, Configuration.of(gpu_type, parts))
    return ours / (job.total_samples / batch * step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", type=Path, default=FIXTURES / "cluster.toml")
    parser.add_argument("--workload", type=Path, default=FIXTURES / "workload.csv")
    parser.add_argument("--profiles", type=Path, default=FIXTURES / "traces")
    parser.add_argument("--sim-config", type=Path)
    add_run_options(parser)
    args = parser.parse_args()
    ratios = run_time_ratios(args.cluster, args.workload, args.profiles)
    inputs = (args.workload, args.profiles, "sia")
    knobs = load_knobs(args.sim_config) if args.sim_config else SimKnobs()
    title = "isolated run time on Sia's profiled placements, hops / Sia (1.000 is exact):"
    simulate_and_print(ratios, args, inputs, knobs, title, 12)


if __name__ == "__main__":
    main()
