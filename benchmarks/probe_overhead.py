"""Per-iteration cost of the hops probe, against the same loop without it.

The loop body is nearly empty, so what is measured is the probe's own cost
(context managers, clock reads, bookkeeping, and the amortised JSON-lines
flush, here every 0.2 s, far more often than the default 5 s). The goal is
< 1 % of a 10 ms iteration, i.e. < 100 us per iteration, in running mode.

    .venv/bin/python benchmarks/probe_overhead.py [--iterations N] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from hopsd.probe import Probe

PHASES = ("data", "forward", "backward", "sync", "update")
ITERATION_S = 0.010


def body() -> int:
    return 1


def bare_loop(n: int) -> float:
    started = time.perf_counter()
    acc = 0
    for _ in range(n):
        for _phase in PHASES:
            acc += body()
    return (time.perf_counter() - started) / n


def probed_loop(n: int, probe: Probe) -> float:
    started = time.perf_counter()
    acc = 0
    done = 0
    for _ in range(n):
        with probe.iteration(samples=32) as it:
            for phase in PHASES:
                with it.phase(phase):
                    acc += body()
        done += 32
        probe.progress(done)
    probe.close()
    return (time.perf_counter() - started) / n


def make_probe(spool: str, mode: str, n: int) -> Probe:
    env = {
        "SLURM_JOB_ID": "bench",
        "HOPS_SPOOL_DIR": spool,
        "HOPS_PROBE_MODE": mode,
        "HOPS_PROBE_ITERATIONS": str(n),
        "HOPS_PROBE_FLUSH_S": "0.2",
    }
    return Probe(environ=env)


def measure(n: int, repeats: int) -> dict[str, float]:
    bare = min(bare_loop(n) for _ in range(repeats))
    with tempfile.TemporaryDirectory() as spool:
        run = min(probed_loop(n, make_probe(spool, "run", n)) for _ in range(repeats))
        profile = min(probed_loop(n, make_probe(spool, "profile", n)) for _ in range(repeats))
    overhead = max(run - bare, 0.0)
    return {
        "iterations": n,
        "bare_us": bare * 1e6,
        "run_mode_us": run * 1e6,
        "profile_mode_us": profile * 1e6,
        "overhead_us": overhead * 1e6,
        "profile_overhead_us": max(profile - bare, 0.0) * 1e6,
        "overhead_ratio_vs_10ms": overhead / ITERATION_S,
        "goal_met": overhead < 0.01 * ITERATION_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.iterations, args.repeats)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"iterations per loop      {figures['iterations']}")
    print(f"bare loop                {figures['bare_us']:8.2f} us/iteration")
    print(f"probe, running mode      {figures['run_mode_us']:8.2f} us/iteration")
    print(f"probe, profiling mode    {figures['profile_mode_us']:8.2f} us/iteration")
    print(f"running-mode overhead    {figures['overhead_us']:8.2f} us/iteration")
    ratio = figures["overhead_ratio_vs_10ms"]
    print(f"vs a 10 ms iteration     {100 * ratio:8.4f} %  (goal < 1 %: {figures['goal_met']})")


if __name__ == "__main__":
    main()
