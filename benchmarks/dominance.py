"""Does hops dominate sia, gavel and FIFO on their own workloads? (issue 28's table)

Runs each workload family through hops's own sweep (:func:`hopsd.sim.sweep_run.run_sweep`,
what ``hops simulate --results DIR`` runs: one cell file per workload, policy and
seed, so a re-run computes only the cells not there yet and a results directory
can be filled over several sessions, here or as a Slurm job array), then prints,
per family and baseline, hops's ratio of average JCT, p99 JCT, max latency ratio
and makespan with a 95 % confidence interval, and whether it meets the goal:
upper bound <= 1.00 for average JCT, p99 JCT and max LR, <= 1.03 for makespan.

    .venv/bin/python benchmarks/dominance.py [--json] [--families paper-64,gavel]
        [--seeds 0-9] [--results DIR] [--executor local|slurm] [--workers N] [--quick]
        [--gavel-dir DIR] [--sia-dir DIR [--sia-cluster F] [--sia-workloads N]]
        [--sim-config F]

**The interval.** Each pair is one workload on one seed run under hops and under
the baseline (same jobs, same hidden truth, same noise draw): its ratio
hops / baseline. The interval is a Student-t 95 % interval of the mean of the
pairs' log ratios, exponentiated: a geometric-mean ratio whose bounds are
ratios too, symmetric for "twice as good" and "twice as bad". A pair whose
baseline figure is 0 counts 1 when hops's is 0 too; otherwise the ratio is
undefined and the goal is not met. Where hops's figure is 0 and the
baseline's not (a ratio of 0 has no log) the interval is taken on the ratios
themselves (``"scale": "linear"``). With one pair the interval is that ratio.

**Families and their inputs** (each family's cells go to ``DIR/<family>/``, so
``hops simulate --results DIR/<family>`` with the same workloads, seeds and
``--sim-config`` fills the same cells):

* ``paper-64``, ``paper-512``: the presets, seeds 0-9 unless ``--seeds``.
* ``gavel``: Gavel's generator traces (``*.trace``, made by
  ``scheduler/scripts/utils/generate_trace.py`` of github.com/stanford-futuredata/gavel)
  with Gavel's throughputs file (its ``scheduler/simulation_throughputs.json``, as
  ``throughputs.json``) in ``--gavel-dir``, on Gavel's 16:16:16 cluster of one-GPU
  servers (``cluster.toml`` there, else ``tests/fixtures/gavel/cluster.toml``).
  ``benchmarks/extract_inputs.sh gavel`` runs that generator (300 jobs at 4, 8 and 12
  jobs an hour, seeds 0 and 1) into such a directory.
  Without it, the family runs the one Gavel trace the repository records
  (``tests/fixtures/gavel/max_min_fairness.trace``, Gavel's physical-cluster
  trace, with an excerpt of its throughputs) and says so: a stand-in, not the
  generator's traces at three arrival rates.
* ``sia-saturn``, ``sia-philly``, ``sia-newtrace``: Sia's published workload CSVs
  under ``--sia-dir``/``workloads`` whose path names the family (saturn,
  philly, newtrace; all of them, or the first ``--sia-workloads N`` by number),
  with Sia's ``traces`` directory beside them (the layout of
  ``sia-simulator/`` in Sia's SOSP '23 artifact, github.com/siasosp23/artifacts,
  which ``benchmarks/extract_inputs.sh sia`` extracts), on a hops cluster file of
  Sia's 64-GPU cluster (``--sia-cluster``, default ``cluster.toml`` in
  ``--sia-dir``, else ``examples/sim/sia-cluster.toml``). The repository holds
  the cluster file, not the workloads; without them the family is reported missing.

Trace families run seeds 0-2 unless ``--seeds`` (the seed draws the hidden
truth and the estimator's noise; the jobs are the trace's). Knobs:
``hopsd/sim/presets/published-knobs.toml`` unless ``--sim-config`` (the
baselines with their published round mechanics; hops with the project's).
``--quick``: paper-64 seeds 0-2 and the first Gavel trace on seed 0 (16 cells,
about 15 s on one CPU), for smoke use.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hops_cli.simulate import stdout_to_stderr
from hopsd.sim.knobs import load_knobs
from hopsd.sim.run import preset_path
from hopsd.sim.seeds import interval, parse_seeds
from hopsd.sim.sweep import Workload, make_workload
from hopsd.sim.sweep_run import run_sweep

ROOT = Path(__file__).resolve().parents[1]
GAVEL_FIXTURES = ROOT / "tests" / "fixtures" / "gavel"
#: hops cluster file of Sia's 64-GPU cluster (the facts and their source are in it)
SIA_CLUSTER = ROOT / "examples" / "sim" / "sia-cluster.toml"
FAMILIES = ("paper-64", "paper-512", "gavel", "sia-saturn", "sia-philly", "sia-newtrace")
POLICIES = ("hops", "sia", "gavel", "fifo")
BASELINES = POLICIES[1:]
#: metric -> the goal's bound on the upper end of hops / baseline's interval
GOALS = {"avg_jct_h": 1.00, "p99_jct_h": 1.00, "max_lr": 1.00, "makespan_h": 1.03}
PRESET_SEEDS = "0-9"
TRACE_SEEDS = "0-2"


@dataclass
class Family:
    """One family's workloads and seeds, and what it lacks of the issue's inputs."""

    name: str
    workloads: list[Workload]
    seeds: list[int]
    missing: str = ""
    notes: list[str] = field(default_factory=list)


def cache_dir() -> Path:
    """Where results go unless ``--results``: the user's cache, kept between sessions."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hops" / "dominance"


def gavel_family(gavel_dir: Path | None, seeds: list[int]) -> Family:
    """Gavel's generator traces from ``gavel_dir``, else the recorded physical-cluster trace."""
    if gavel_dir is not None and sorted(gavel_dir.glob("*.trace")):
        cluster = gavel_dir / "cluster.toml"
        if not cluster.is_file():
            cluster = GAVEL_FIXTURES / "cluster.toml"
        loads = [
            make_workload(
                f"gavel-{t.stem}",
                cluster=cluster,
                trace=t,
                profiles=gavel_dir / "throughputs.json",
                trace_format="gavel",
            )
            for t in sorted(gavel_dir.glob("*.trace"))
        ]
        return Family("gavel", loads, seeds)
    stand_in = make_workload(
        "gavel-max_min_fairness",
        cluster=GAVEL_FIXTURES / "cluster.toml",
        trace=GAVEL_FIXTURES / "max_min_fairness.trace",
        profiles=GAVEL_FIXTURES / "throughputs.json",
        trace_format="gavel",
    )
    missing = (
        "Gavel's trace-generator traces (three arrival rates x two seeds on 16:16:16) and its "
        "whole throughputs file are not in the repository (give --gavel-dir); ran the "
        "recorded physical-cluster trace max_min_fairness.trace (96 jobs) as a stand-in"
    )
    return Family("gavel", [stand_in], seeds, missing)


def workload_order(path: Path) -> tuple[str, int, str]:
    """Sia's ``workload-N.csv`` in the order of N (``workload-10`` after ``workload-9``)."""
    stem, _, number = path.stem.rpartition("-")
    return (str(path.parent / stem), int(number), "") if number.isdigit() else (str(path), 0, "")


def sia_family(
    name: str, sia_dir: Path | None, cluster: Path | None, seeds: list[int], first: int | None
) -> Family:
    """Sia's published workloads of the family (saturn, philly, newtrace) under ``sia_dir``,
    the ``first`` of them by number (all when None), on the hops cluster file ``cluster``
    (default: ``cluster.toml`` in ``sia_dir``, else the repository's file of Sia's cluster)."""
    key = name.removeprefix("sia-")
    absent = (
        f"Sia's published {key} workloads and its traces directory are not in the "
        "repository (give --sia-dir with workloads/ and traces/, as sia-simulator/ of "
        "Sia's artifact: benchmarks/extract_inputs.sh sia puts them there)"
    )
    if sia_dir is None:
        return Family(name, [], seeds, absent)
    found = sorted(
        (p for p in (sia_dir / "workloads").rglob("*.csv") if key in str(p.relative_to(sia_dir))),
        key=workload_order,
    )[:first]
    if cluster is None:
        cluster = sia_dir / "cluster.toml"
        cluster = cluster if cluster.is_file() else SIA_CLUSTER
    traces = sia_dir / "traces"
    if not found or not cluster.is_file() or not traces.is_dir():
        return Family(name, [], seeds, f"{absent}; looked in {sia_dir}")
    loads = [
        make_workload(
            "-".join(["sia", *p.relative_to(sia_dir / "workloads").with_suffix("").parts]),
            cluster=cluster,
            trace=p,
            profiles=traces,
            trace_format="sia",
        )
        for p in found
    ]
    return Family(name, loads, seeds)


def families_of(args: argparse.Namespace) -> list[Family]:
    """The families asked for, with their workloads and seeds."""
    if args.quick:
        gavel = gavel_family(args.gavel_dir, [0])
        gavel.workloads = gavel.workloads[:1]
        paper = Family("paper-64", [make_workload("paper-64", preset="paper-64")], [0, 1, 2])
        return [paper, gavel]
    out = []
    for name in args.families.split(","):
        if name not in FAMILIES:
            raise SystemExit(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
        if name.startswith("paper-"):
            seeds = parse_seeds(args.seeds or PRESET_SEEDS)
            out.append(Family(name, [make_workload(name, preset=name)], seeds))
        elif name == "gavel":
            out.append(gavel_family(args.gavel_dir, parse_seeds(args.seeds or TRACE_SEEDS)))
        else:
            seeds = parse_seeds(args.seeds or TRACE_SEEDS)
            out.append(sia_family(name, args.sia_dir, args.sia_cluster, seeds, args.sia_workloads))
    return out


def pair_ratio(ours: float, theirs: float) -> float | None:
    """hops / baseline of one pair: 1 when both are 0, None (undefined) when only theirs is."""
    if theirs > 0:
        return ours / theirs
    return 1.0 if ours == 0 else None


def ratio_interval(pairs: Sequence[tuple[float, float]], goal: float) -> dict[str, Any]:
    """Geometric-mean ratio of (hops, baseline) pairs with its t interval on log ratios
    (on the ratios themselves when one is 0, which has no log)."""
    ratios = [pair_ratio(a, b) for a, b in pairs]
    defined = [r for r in ratios if r is not None]
    out: dict[str, Any] = {"n": len(pairs), "undefined": len(pairs) - len(defined)}
    if not defined:
        out.update(ratio=None, ci_low=None, ci_high=None, scale=None)
    elif min(defined) > 0:
        logs = interval([math.log(r) for r in defined])
        out.update({k: math.exp(logs[k]) for k in ("mean", "ci_low", "ci_high")}, scale="log")
        out["ratio"] = out.pop("mean")
    else:
        plain = interval(defined)
        out.update(ratio=plain["mean"], ci_low=plain["ci_low"], ci_high=plain["ci_high"])
        out["scale"] = "linear"
    out["goal"] = goal
    out["meets"] = out["undefined"] == 0 and out["ci_high"] is not None and out["ci_high"] <= goal
    return out


def family_ratios(merged: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per baseline and metric, hops's ratio over every (workload, seed) pair of a family.

    ``merged`` is the sweep's results object per workload (``per_seed`` holds each
    seed's figures per policy)."""
    out: dict[str, dict[str, Any]] = {}
    for base in BASELINES:
        per_metric = {}
        for metric, goal in GOALS.items():
            pairs = [
                (figs["hops"][metric], figs[base][metric])
                for w in merged
                for figs in w["per_seed"].values()
                if "hops" in figs and base in figs
            ]
            if pairs:
                per_metric[metric] = ratio_interval(pairs, goal)
        if per_metric:
            out[base] = per_metric
    return out


def run_family(family: Family, args: argparse.Namespace, knobs: Any) -> dict[str, Any]:
    """Sweep one family (skipping finished cells) and compute its ratios."""
    doc: dict[str, Any] = {
        "workloads": [w.name for w in family.workloads],
        "seeds": family.seeds,
        "missing": family.missing or None,
    }
    if not family.workloads:
        return doc
    remote = None
    if args.executor == "slurm":
        from hopsd.sweep_slurm import SlurmArray, SlurmOptions

        remote = SlurmArray(SlurmOptions(partition=args.partition))
    started = time.perf_counter()
    with stdout_to_stderr():  # solver banners from native code: stdout is for the figures
        outcome = sweep(family, args, knobs, remote)
    doc["cells"] = {"total": outcome.cells, "computed": outcome.computed}
    doc["wall_s"] = round(time.perf_counter() - started, 1)
    doc["cell_wall_s"] = cell_walls(outcome.merged)
    doc["ratios"] = family_ratios(outcome.merged)
    return doc


def sweep(family: Family, args: argparse.Namespace, knobs: Any, remote: Any) -> Any:
    """The family's sweep in ``DIR/<family>``: its missing cells computed, all merged."""
    return run_sweep(
        family.workloads,
        seeds=family.seeds,
        policies=list(POLICIES),
        results=Path(args.results) / family.name,
        knobs=knobs,
        workers=args.workers,
        remote=remote,
        progress=lambda done, total, _what: print(
            f"  {family.name}: {done}/{total} cells", file=sys.stderr
        ),
    )


def cell_walls(merged: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Planning seconds per policy, summed over the family's cells (what a cell costs)."""
    out: dict[str, float] = {}
    for w in merged:
        for figs in w["per_seed"].values():
            for policy, f in figs.items():
                out[policy] = round(out.get(policy, 0.0) + f.get("wall_s", 0.0), 1)
    return out


def print_table(report: Mapping[str, Any]) -> None:
    """One line per family, baseline and metric: ratio [CI], goal met or not."""
    for name, fam in report["families"].items():
        where = f"{len(fam['workloads'])} workload(s) x seeds {fam['seeds']}"
        print(f"{name}: {where}" + (f"  [{fam['missing']}]" if fam["missing"] else ""))
        for base, metrics in fam.get("ratios", {}).items():
            cells = []
            for metric, r in metrics.items():
                mark = "ok" if r["meets"] else "NO"
                if r["ratio"] is None:
                    cells.append(f"{metric} undefined NO")
                    continue
                ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
                cells.append(f"{metric} {r['ratio']:.3f} {ci} {mark}")
            print(f"  vs {base:5s} " + "  ".join(cells))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--seeds", help=f"default {PRESET_SEEDS} (presets), {TRACE_SEEDS} (traces)")
    parser.add_argument("--results", type=Path, default=cache_dir())
    parser.add_argument("--executor", choices=("local", "slurm"), default="local")
    parser.add_argument("--partition", help="--executor slurm: partition")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gavel-dir", type=Path)
    parser.add_argument("--sia-dir", type=Path)
    parser.add_argument("--sia-cluster", type=Path)
    parser.add_argument("--sia-workloads", type=int, help="the first N of each Sia family")
    parser.add_argument("--sim-config", type=Path, default=preset_path("published-knobs.toml"))
    args = parser.parse_args(argv)
    knobs = load_knobs(args.sim_config)
    started = time.perf_counter()
    report: dict[str, Any] = {
        "results": str(args.results),
        "sim_config": str(args.sim_config),
        "policies": list(POLICIES),
        "ci": "95 % Student-t interval of mean log(hops / baseline) over (workload, seed) pairs",
        "families": {f.name: run_family(f, args, knobs) for f in families_of(args)},
    }
    report["wall_s"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return report


if __name__ == "__main__":
    main()
