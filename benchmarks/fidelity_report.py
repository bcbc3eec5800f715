"""The figures the importer-fidelity benchmarks print (gavel_fidelity.py, sia_fidelity.py):
each job's isolated run time in hops's simulator over its source's, per group, and the
policies' average JCT."""

from __future__ import annotations

import json
import statistics
from typing import Any


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
