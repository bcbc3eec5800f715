"""One decision path: a workload run live under hopsd, then replayed from its ledger.

hopsd (in process, the daemon's own tick) schedules a workload with staggered
arrivals on the live Slurm test cluster, a private SQLite ledger recording what
happened; then ``hops replay``'s reading of that ledger is replayed by the
simulator under the same policy, settings and scheduling step. If both are one
decision path, the replayed JCTs match the live ones up to what the simulator
does not model (Slurm launch latency, tick granularity, learning from probes):

    eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/live_vs_replay.py [--scale 1.0] [--json]

prints ``{"jobs", "live_avg_jct_s", "replay_avg_jct_s", "avg_jct_error",
"median_job_error"}`` (errors as fractions; ``--json`` adds per-job rows).
Goal: avg JCT within 10 %, median per-job error within 20 %.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "daemon"))

from live_replay import (
    Arrival,
    benchmark_env,
    compare,
    live_arguments,
    quietly,
    replay_live,
    run_live,
    scaled,
)

#: Staggered arrivals on the 18-GPU test cluster (k80 x2, v100 2x4, a100 2x4, two
#: of them half-speed servers): contended for a while, then draining. Samples at
#: 100 samples/s per k80-GPU; ``type_speed`` changes a job's gain per GPU type.
WORKLOAD = [
    Arrival(0, (1, 2), 6000),
    Arrival(0, (2, 4), 16000, "a100=6"),
    Arrival(2, (4,), 12000),
    Arrival(4, (1,), 3000, "v100=3"),
    Arrival(6, (1, 2, 4), 12000),
    Arrival(8, (2,), 8000),
    Arrival(12, (1, 2), 5000, "a100=2"),
    Arrival(16, (4,), 16000),
    Arrival(20, (1,), 4000),
    Arrival(24, (2, 4), 10000, "k80=1.5"),
    Arrival(30, (1, 2), 6000, "a100=5"),
    Arrival(36, (1,), 2500),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", type=float, default=4.0, help="multiply every job's samples and arrival time"
    )
    args = live_arguments(parser)
    if args is None:
        return 2
    workload = scaled(WORKLOAD, args.scale)
    with benchmark_env(args.keep, "hops-live-replay-") as env:

        def live_then_replay() -> dict[str, Any]:
            window = run_live(env, workload, deadline_s=900)
            return replay_live(env, window, env.config.policy)

        results = quietly(live_then_replay)
    figures = compare(results, env.config.policy)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"jobs {figures['jobs']}")
    print(f"live avg JCT    {figures['live_avg_jct_s']:.1f} s")
    print(f"replay avg JCT  {figures['replay_avg_jct_s']:.1f} s")
    print(f"avg JCT error   {figures['avg_jct_error']:.1%} (goal <= 10 %)")
    print(f"median job err  {figures['median_job_error']:.1%} (goal <= 20 %)")
    for row in figures["per_job"]:
        print(
            f"  job {row['job']:>6} demands {row['demands']}: live {row['live_jct_s']:7.1f} s"
            f"  replay {row['replay_jct_s']:7.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
