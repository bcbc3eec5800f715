"""How faithfully ``--trace-format gavel`` reproduces Gavel's own inputs.

Gavel's simulator runs a job of scale factor n on a type for
``total_steps / throughput[type][(job type, n)]`` seconds. This script reads a
Gavel ``.trace`` and throughputs JSON through hops's importer and sets each
job's isolated run time in the simulator's truth (alone, n GPUs of the type,
spread over the cluster's first n servers of it, no restarts) beside Gavel's,
per type and scale factor: the ratio hops / Gavel (1.000 is exact). It then
replays the trace under FIFO and Gavel and prints their average JCT.

    .venv/bin/python benchmarks/gavel_fidelity.py [--cluster F --trace F --throughputs F]
        [--sim-config F] [--policies fifo,gavel] [--json]

Defaults: Gavel's ``max_min_fairness.trace`` and an excerpt of its simulation
throughputs (``tests/fixtures/gavel``) on 16 one-GPU servers per type, with
Gavel's published round mechanics (``hopsd/sim/presets/published-knobs.toml``).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from fidelity_report import add_run_options, simulate_and_print

from hopsd.core.model import Configuration
from hopsd.sim.gavel_format import read_gavel_throughputs
from hopsd.sim.knobs import load_knobs
from hopsd.sim.run import load_inputs, preset_path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "gavel"


def run_time_ratios(cluster: Path, trace: Path, throughputs: Path) -> dict[str, list[float]]:
    """``"<type> x<n>"`` -> each job's isolated run time in hops's truth over Gavel's."""
    truth, jobs = load_inputs(None, cluster, trace, throughputs, 0, "gavel")
    table = read_gavel_throughputs(throughputs)
    by_id = {j.job_id: j for j in jobs}
    lines = trace.read_text(encoding="utf-8").splitlines()
    out: dict[str, list[float]] = defaultdict(list)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        job_type, steps, scale = fields[0], int(fields[5]), int(fields[6])
        job = by_id[f"g{number:05d}"]
        for gpu_type in sorted(truth.cluster.gpu_types):
            gavels = table[gpu_type].get((job_type, scale), 0.0)
            servers = [n.id for n in truth.cluster.nodes_of_type(gpu_type)][:scale]
            if gavels <= 0 or len(servers) < scale:
                continue
            cfg = Configuration.of(gpu_type, dict.fromkeys(servers, 1))
            ours = job.total_samples / truth.throughput(job.model, cfg)
            out[f"{gpu_type} x{scale}"].append(ours / (steps / gavels))
    return dict(sorted(out.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", type=Path, default=FIXTURES / "cluster.toml")
    parser.add_argument("--trace", type=Path, default=FIXTURES / "max_min_fairness.trace")
    parser.add_argument("--throughputs", type=Path, default=FIXTURES / "throughputs.json")
    parser.add_argument("--sim-config", type=Path, default=preset_path("published-knobs.toml"))
    add_run_options(parser)
    args = parser.parse_args()
    ratios = run_time_ratios(args.cluster, args.trace, args.throughputs)
    inputs = (args.trace, args.throughputs, "gavel")
    title = "isolated run time, hops / Gavel (1.000 is exact):"
    simulate_and_print(ratios, args, inputs, load_knobs(args.sim_config), title, 10)


if __name__ == "__main__":
    main()
