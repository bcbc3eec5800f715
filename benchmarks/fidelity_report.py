"""The figures the importer-fidelity benchmarks print (gavel_fidelity.py, sia_fidelity.py):
each job's isolated run time in hops's simulator over its source's, per group, and the
policies' average JCT."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from hopsd.sim.knobs import SimKnobs
from hopsd.sim.run import simulate


def fidelity_report(ratios: dict[str, list[float]], simulated: dict[str, Any]) -> dict[str, Any]:
    """Median, min and max run-time ratio per group; average JCT per policy."""
    return {
        "run_time_ratio": {
            k: {"jobs": len(v), "median": statistics.median(v), "min": min(v), "max": max(v)}
            for k, v in ratios.items()
        },
        "avg_jct_h": {name: f["avg_jct_h"] for name, f in simulated["policies"].items()},
    }


def print_report(report: dict[str, Any], title: str, as_json: bool, width: int) -> None:
    """The report as JSON, or a line per group under ``title`` and the average JCTs."""
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print(title)
    for key, r in report["run_time_ratio"].items():
        spread = f"min {r['min']:.3f}  max {r['max']:.3f}"
        print(f"  {key:{width}s} {r['jobs']:3d} jobs  median {r['median']:.3f}  {spread}")
    jct = ", ".join(f"{name} {h:.2f} h" for name, h in report["avg_jct_h"].items())
    print(f"average JCT: {jct}")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options both benchmarks take besides their inputs: policies and JSON output."""
    parser.add_argument("--policies", default="fifo,gavel")
    parser.add_argument("--json", action="store_true")


def simulate_and_print(
    ratios: dict[str, list[float]],
    args: argparse.Namespace,
    inputs: tuple[Path, Path, str],
    knobs: SimKnobs,
    title: str,
    width: int,
) -> None:
    """Simulate the source's trace (``inputs``: trace, profiles, format) under ``--policies``
    on ``--cluster``, and print the report of ``ratios`` and the policies' JCTs."""
    trace, profiles, trace_format = inputs
    out = simulate(
        None,
        cluster=args.cluster,
        trace=trace,
        profiles=profiles,
        policies=args.policies.split(","),
        trace_format=trace_format,
        knobs=knobs,
    )
    print_report(fidelity_report(ratios, out), title, args.json, width)
