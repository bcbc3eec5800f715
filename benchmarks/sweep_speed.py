"""Wall time of a sweep run locally in processes and as a Slurm job array, and of a re-run.

The same sweep (workloads x policies x seeds) runs into two fresh results
directories: with ``--executor local`` over ``--workers`` processes, then (when
``SLURM_CONF`` names a cluster, e.g. the test cluster's) as one job array on
Slurm; then once more on Slurm, where every cell is there and nothing is
submitted. It prints each wall time, the array's overhead per cell over the local
run, and whether the two runs' cells agree job by job (they must: a cell is a
function of its inputs and seed).

On the test cluster every node is this same host, so the array's tasks share its
CPUs with each other; the figure shows the cost of submitting and gathering, not
the speed-up a real cluster's nodes give.

    .venv/bin/python benchmarks/sweep_speed.py [--preset paper-64] [--policies fifo,gavel]
        [--seeds 0-3] [--workers 2] [--array-parallelism 2] [--cells-per-task N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hopsd.sim.seeds import parse_seeds
from hopsd.sim.sweep import make_workload
from hopsd.sim.sweep_run import run_sweep
from hopsd.solver_banner import silence_solver_banner
from hopsd.sweep_slurm import SlurmArray, SlurmOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sim"))
from sweep_cells import cell_docs


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    workloads = [make_workload(None, preset=p) for p in args.preset]
    sweep = {
        "seeds": parse_seeds(args.seeds),
        "policies": args.policies.split(","),
    }
    local = run_sweep(workloads, results=work / "local", workers=args.workers, **sweep)
    out: dict[str, Any] = {
        "workloads": args.preset,
        "cells": local.cells,
        "local_s": round(local.wall_s, 2),
        "workers": args.workers,
    }
    if not os.environ.get("SLURM_CONF"):
        out["slurm"] = "skipped: SLURM_CONF unset"
        return out
    options = SlurmOptions(
        time_limit_min=30,
        array_parallelism=args.array_parallelism,
        cells_per_task=args.cells_per_task,
    )
    slurm = run_sweep(workloads, results=work / "slurm", remote=SlurmArray(options), **sweep)
    again = run_sweep(workloads, results=work / "slurm", remote=SlurmArray(options), **sweep)
    out.update(
        {
            "slurm_s": round(slurm.wall_s, 2),
            "array_parallelism": args.array_parallelism,
            "cells_per_task": args.cells_per_task or 1,
            "overhead_per_cell_s": round((slurm.wall_s - local.wall_s) / local.cells, 2),
            "rerun_s": round(again.wall_s, 2),
            "rerun_computed": again.computed,
            "cells_identical": cell_docs(work / "local") == cell_docs(work / "slurm"),
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", action="append", default=None)
    parser.add_argument("--policies", default="fifo,gavel")
    parser.add_argument("--seeds", default="0-3")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--array-parallelism", type=int, default=2)
    parser.add_argument("--cells-per-task", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.preset = args.preset or ["paper-64"]
    silence_solver_banner()  # before the worker processes fork: --json stays one document
    with tempfile.TemporaryDirectory(prefix="hops-sweep-bench-") as tmp:
        figures = measure(args, Path(tmp))
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
