"""How long does one hops round take to decide as clusters grow, and how good is the plan?

Seeded synthetic clusters of 8-GPU servers with 4-5 GPU types, a busy steady
state (running jobs on most GPUs) and a long queue of jobs whose demand sets
hold up to 8 options in 1-16 GPUs (4096 GPUs: 4000 queued jobs; 8192 GPUs,
the size of the largest single systems in service: 8000 queued jobs, goal 2 s
median within 1 % of the proven bound). For each size the script runs
``plan_round`` several times and prints: GPUs, queued+running jobs, window
size, ILP columns of the main plan, median and max decision time (wall), the
median CPU time of the process (``cpu_median_s``: what other load on the
machine does not inflate), and the objective gap of the plan to the exact
optimum -- the same round solved with ``mip_gap = 0`` on the per-node model
with every configuration of every node -- where that exact solve finishes
within 60 s (``gap``, null otherwise). ``first_s`` is the first round's time,
before any earlier round's answers could be reused.

By default every round plans the very same snapshot. hopsd reads its profiles
anew from the ledger each tick, as new but equal objects: ``--reread`` plans
each round on such a copy of the store, made outside the timing.

Where the class-level model is used (clusters of 24+ nodes), its ILP is a
relaxation of the exact per-node model, so HiGHS's proven bound on it bounds
the exact optimum from above: ``gap_bound`` is the distance of the plan to
that bound, an upper limit on the true gap that is available at every size.
``exact_s`` is how long the exact solve took (the baseline, stopped at 60 s).
Objectives are eq. 11 valued with the main plan's weights and gains, for the
placements of the main plan's jobs after every plan of the round.

    .venv/bin/python benchmarks/solver_scaling.py                 # all sizes
    .venv/bin/python benchmarks/solver_scaling.py --sizes 64,256 --repeats 3
    .venv/bin/python benchmarks/solver_scaling.py --json
    .venv/bin/python benchmarks/solver_scaling.py --sizes 8192 --reread
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
from dataclasses import replace

from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.rounds import PlannerOptions, plan_round_with
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.throughput import InMemoryThroughputStore, Mixture, PhaseProfile

QUEUE = {64: 100, 256: 400, 512: 800, 1024: 1400, 2048: 2000, 4096: 4000, 8192: 8000}
#: Goals per size: median decision seconds and distance to the proven bound.
GOALS = {2048: (1.0, 0.01), 8192: (2.0, 0.01)}
TYPES = (
    GpuType("gtx1080ti", b_link=1.5e9, b_net=0.6e9, speed=1.0),
    GpuType("titanxp", b_link=1.6e9, b_net=0.6e9, speed=1.1),
    GpuType("rtx3090", b_link=3.0e9, b_net=1.2e9, speed=2.2),
    GpuType("rtx3090-old", b_link=3.0e9, b_net=1.0e9, speed=1.5),
    GpuType("a100", b_link=6.0e9, b_net=2.5e9, speed=3.5),
)
OPTIONS = (1, 2, 3, 4, 6, 8, 10, 12, 16)
EXACT_LIMIT_S = 60.0


def make_cluster(gpus: int) -> Cluster:
    servers = gpus // 8
    n_types = 4 if gpus <= 64 else 5
    nodes = [
        Node(f"n{i:04d}", TYPES[i * n_types // servers].name, 8, server_model="s")
        for i in range(servers)
    ]
    return Cluster.build(TYPES[:n_types], nodes)


def make_job(rng: random.Random, index: int, now: float) -> Job:
    first = rng.choice((1, 1, 1, 2, 2, 2, 4, 4, 8))
    larger = [d for d in OPTIONS if d > first]
    extra = rng.sample(larger, rng.randint(0, min(7, len(larger))))
    demands = tuple(sorted({first, *extra}))
    return Job(
        id=f"j{index:05d}",
        demands=demands,
        total_samples=rng.uniform(1e5, 5e7),
        batch_size=rng.choice((32, 64, 128)),
        params=rng.uniform(5e6, 3e8),
        submit_time=now - rng.uniform(0, 7200),
        wait_time=rng.uniform(0, 3600),
    )


def add_profiles(store: InMemoryThroughputStore, rng: random.Random, job: Job) -> None:
    base = rng.uniform(0.05, 0.4)
    data = rng.uniform(0.0, 0.3)
    for t in TYPES:
        k = base / t.speed * rng.uniform(0.85, 1.15)
        load = Mixture(0.7, data * 0.3, 0.0, data * rng.uniform(0.8, 2.0), 0.0)
        store.set_profile(job.id, t.name, PhaseProfile(k / 3, 2 * k / 3, k / 10, 1, load))


def steady_state(cluster: Cluster, jobs: list[Job], rng: random.Random) -> list[Job]:
    """Place about 85% of the GPUs with the first jobs, aggregated where they fit."""
    free = {n.id: n.gpus for n in cluster.nodes}
    target = int(cluster.total_gpus * 0.85)
    used = 0
    out: list[Job] = []
    order = list(cluster.nodes)
    rng.shuffle(order)
    for job in jobs:
        config = None
        if used < target:
            g = job.demands[0]
            for node in order:
                if free[node.id] >= g:
                    free[node.id] -= g
                    used += g
                    config = Configuration.of(node.gpu_type, {node.id: g})
                    break
        out.append(replace(job, current=config, wait_time=job.wait_time * 0.2) if config else job)
    return out


def make_snapshot(gpus: int, seed: int) -> Snapshot:
    rng = random.Random(seed * 7919 + gpus)
    cluster = make_cluster(gpus)
    now = 10_000.0
    queued = QUEUE[gpus]
    n_running = gpus // 3
    jobs = [make_job(rng, i, now) for i in range(queued + n_running)]
    jobs = steady_state(cluster, jobs, rng)
    store = InMemoryThroughputStore()
    for job in jobs:
        add_profiles(store, rng, job)
        if job.current is not None:
            node_id, g = job.current.parts[0]
            store.set_entity_aggregated(job.id, node_id, g, rng.uniform(20, 200))
    return Snapshot(now=now, cluster=cluster, jobs=tuple(jobs), store=store)


def silence_solver_banner() -> None:
    """HiGHS prints a banner on first use; keep it out of the (possibly JSON) output."""
    import highspy

    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            highspy.Highs()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def exact_objective(snapshot: Snapshot, settings: Settings) -> tuple[float | None, float]:
    """The exact optimum (None when not proven within the limit) and the seconds it took."""
    exact = replace(settings, mip_gap=0.0, time_limit_s=EXACT_LIMIT_S)
    t0 = time.perf_counter()
    plan = plan_round_with(snapshot, exact, PlannerOptions(exact=True))
    seconds = time.perf_counter() - t0
    if "optimal=True" not in plan.notes[0]:
        return None, seconds
    return plan.objective, seconds


def measure(
    gpus: int, repeats: int, exact: bool, settings: Settings, reread: bool = False
) -> dict[str, object]:
    snapshot = make_snapshot(gpus, seed=1)
    times: list[float] = []
    cpu: list[float] = []
    plan = None
    for _ in range(repeats):
        if reread:
            snapshot = replace(snapshot, store=copy.deepcopy(snapshot.store))
        t0, c0 = time.perf_counter(), time.process_time()
        plan = plan_round_with(snapshot, settings, PlannerOptions())
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert plan is not None
    columns = int(plan.notes[0].split()[2])
    gap: float | None = None
    exact_s: float | None = None
    if exact:
        best, exact_s = exact_objective(snapshot, settings)
        if best is not None and best > 0:
            gap = max(best - plan.objective, 0.0) / best
    gap_bound: float | None = None
    if PlannerOptions().uses_classes(len(snapshot.cluster.nodes)):
        bound = float(plan.notes[0].rsplit("bound=", 1)[1])
        gap_bound = max(bound - plan.objective, 0.0) / bound if bound > 0 else 0.0
    return {
        "gpus": gpus,
        "jobs": len(snapshot.jobs),
        "window": len(plan.window),
        "variables": columns,
        "median_s": statistics.median(times),
        "first_s": times[0],
        "max_s": max(times),
        "cpu_median_s": statistics.median(cpu),
        "gap": gap,
        "gap_bound": gap_bound,
        "exact_s": exact_s,
    }


def baseline(row: dict[str, object]) -> str:
    """The exact per-node solve of the same round, as a time and a speed ratio."""
    exact_s = row["exact_s"]
    if exact_s is None:
        return "exact: not run"
    ratio = float(exact_s) / float(row["median_s"])  # type: ignore[arg-type]
    proven = "" if row["gap"] is not None else " (not proven optimal)"
    return f"exact: {float(exact_s):.2f}s{proven}, {ratio:.0f}x slower"  # type: ignore[arg-type]


def goal(row: dict[str, object]) -> str:
    """Whether a size with a goal meets it (median time and distance to the bound)."""
    target = GOALS.get(int(row["gpus"]))  # type: ignore[call-overload]
    if target is None:
        return ""
    seconds, gap = target
    met = float(row["median_s"]) <= seconds and (  # type: ignore[arg-type]
        row["gap_bound"] is not None and float(row["gap_bound"]) <= gap  # type: ignore[arg-type]
    )
    return f"  goal {seconds:.0f}s/{100 * gap:.0f}%: {'met' if met else 'missed'}"


def percent(value: object) -> str:
    return "n/a" if value is None else f"{100 * float(value):.3f}%"  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,512,1024,2048,4096,8192")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-exact", action="store_true", help="skip the exact baseline solve")
    parser.add_argument("--exact-max-gpus", type=int, default=512)
    parser.add_argument(
        "--reread", action="store_true", help="plan each round on new, equal profile objects"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    silence_solver_banner()
    settings = Settings()
    rows = []
    for gpus in (int(s) for s in args.sizes.split(",")):
        if gpus not in QUEUE:
            parser.error(f"size {gpus} not one of {sorted(QUEUE)}")
        exact = not args.no_exact and gpus <= args.exact_max_gpus
        rows.append(measure(gpus, args.repeats, exact, settings, args.reread))
        if not args.json:
            r = rows[-1]
            print(
                f"{r['gpus']:>5} GPUs  {r['jobs']:>5} jobs  window {r['window']:>4}  "
                f"vars {r['variables']:>6}  median {r['median_s']:.3f}s  "
                f"first {r['first_s']:.3f}s  max {r['max_s']:.3f}s  "
                f"cpu {r['cpu_median_s']:.3f}s  gap {percent(r['gap'])}  "
                f"gap to bound {percent(r['gap_bound'])}  {baseline(r)}{goal(r)}",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
