"""Wall time of the simulator: the paper-512 comparison and a 10,000-job trace.

Runs each policy on the paper-512 preset (500 jobs, 512 GPUs) and one policy on
a 10,000-job workload drawn on the same cluster at 40 jobs/h (250 h of arrivals,
a load the cluster can sustain; at the preset's 100 jobs/h the queue would grow
without bound), then
prints the wall times and their ratios to the FIFO run measured in the same
process (FIFO's cost is almost all simulator, so the ratio shows what each
policy's planning adds). Goal: all four paper-512 runs within 60 s on 2 cores.

The policies are first timed one after the other, each alone; then the whole
comparison is timed as ``simulate(..., workers=N)`` runs it (``--workers``,
default 2: one process per core), which is the wall time a user of
``hops simulate`` waits. ``--workers 1`` skips the second measurement.

    .venv/bin/python benchmarks/simulate_speed.py [--policies hops,sia,gavel,fifo]
        [--big-policy fifo] [--big-jobs 10000] [--big-rate 40] [--seed 0] [--workers 2]
        [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from hopsd.sim.engine import EngineConfig
from hopsd.sim.run import load_inputs, run_policy, simulate
from hopsd.sim.workload import PRESETS, generate

GOAL_S = 60.0


def _time_policy(truth, jobs, name: str, seed: int) -> tuple[float, float]:
    started = time.perf_counter()
    result = run_policy(truth, jobs, name, EngineConfig(seed=seed))
    wall = time.perf_counter() - started
    makespan_h = max(j.finish_time or 0.0 for j in result.jobs) / 3600
    return wall, makespan_h


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="hops,sia,gavel,fifo")
    parser.add_argument("--big-policy", default="fifo")
    parser.add_argument("--big-jobs", type=int, default=10_000)
    parser.add_argument("--big-rate", type=float, default=40.0, help="jobs per hour")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    truth, jobs = load_inputs("paper-512", None, None, None, args.seed)
    names = [p for p in args.policies.split(",") if p]
    if "fifo" not in names:
        names.append("fifo")
    walls: dict[str, float] = {}
    makespans: dict[str, float] = {}
    for name in names:
        walls[name], makespans[name] = _time_policy(truth, jobs, name, args.seed)
    base = walls["fifo"]
    parallel_wall = None
    if args.workers > 1:
        started = time.perf_counter()
        simulate("paper-512", policies=names, seed=args.seed, workers=args.workers)
        parallel_wall = time.perf_counter() - started
    big_spec = replace(PRESETS["paper-512"], n_jobs=args.big_jobs, jobs_per_hour=args.big_rate)
    big_jobs = generate(big_spec, truth, args.seed)
    big_wall, big_makespan = _time_policy(truth, big_jobs, args.big_policy, args.seed)
    total = sum(walls.values())
    report = {
        "paper512_wall_s": walls,
        "paper512_ratio_to_fifo": {n: w / base for n, w in walls.items()},
        "paper512_total_s": total,
        "paper512_goal_s": GOAL_S,
        "paper512_workers": args.workers,
        "paper512_parallel_wall_s": parallel_wall,
        "paper512_makespan_h": makespans,
        "big_trace": {
            "jobs": args.big_jobs,
            "policy": args.big_policy,
            "wall_s": big_wall,
            "simulated_h": big_makespan,
            "jobs_per_wall_s": args.big_jobs / big_wall,
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"paper-512 ({len(jobs)} jobs, {truth.cluster.total_gpus} GPUs), seed {args.seed}")
    for name in names:
        print(
            f"  {name:<8} {walls[name]:8.1f} s   x{walls[name] / base:6.1f} of fifo   "
            f"makespan {makespans[name]:.2f} h"
        )
    verdict = "meets" if total <= GOAL_S else "misses"
    print(f"  total    {total:8.1f} s one after the other ({verdict} the {GOAL_S:.0f} s goal)")
    if parallel_wall is not None:
        verdict = "meets" if parallel_wall <= GOAL_S else "misses"
        print(
            f"  simulate(workers={args.workers}): {parallel_wall:.1f} s wall for all "
            f"{len(names)} ({verdict} the {GOAL_S:.0f} s goal)"
        )
    print(
        f"{args.big_jobs}-job trace under {args.big_policy}: {big_wall:.1f} s wall, "
        f"{big_makespan:.1f} h simulated, {args.big_jobs / big_wall:.0f} jobs/s"
    )


if __name__ == "__main__":
    main()
