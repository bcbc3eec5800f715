"""How long the estimator and the LR ordering take at the paper's simulation scale.

512 GPUs in 64 eight-GPU servers of 5 types, 2000 queued jobs. Prints wall
times and their ratio to a baseline measured in the same run (sorting the same
jobs by a plain attribute), so figures stay comparable across machines.

    .venv/bin/python benchmarks/bench_estimator_priorities.py
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from hopsd.core.estimator import Estimator
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.priorities import PriorityContext, get_priority, order_jobs
from hopsd.core.settings import Settings
from hopsd.core.throughput import InMemoryThroughputStore, Mixture, PhaseProfile

TYPES = ("gtx1080ti", "titanxp", "rtx3090", "rtx3090-8g", "rtx3090-10g")
SERVERS = (16, 16, 16, 8, 8)
N_JOBS = 2000
REPEATS = 5


def build_cluster() -> Cluster:
    nodes = [
        Node(f"{name}-{i:02d}", name, 8)
        for name, count in zip(TYPES, SERVERS, strict=True)
        for i in range(count)
    ]
    return Cluster.build([GpuType(t, speed=1.0 + k / 2) for k, t in enumerate(TYPES)], nodes)


def build_jobs(rng: random.Random) -> list[Job]:
    demand_sets = [(1,), (1, 2), (2, 4), (1, 2, 4, 8), (4, 8, 16)]
    return [
        Job(
            f"job{i}",
            rng.choice(demand_sets),
            total_samples=rng.uniform(1e4, 1e7),
            submit_time=rng.uniform(0, 3600),
            wait_time=rng.uniform(0, 3600),
        )
        for i in range(N_JOBS)
    ]


def build_store(rng: random.Random, jobs: list[Job]) -> InMemoryThroughputStore:
    """Half the jobs profiled (theory layer), a quarter measured by type, the rest unknown."""
    store = InMemoryThroughputStore()
    for i, job in enumerate(jobs):
        for gpu_type in TYPES:
            if i % 4 < 2:
                data = Mixture(0.8, rng.uniform(0.01, 0.1), 0.0, rng.uniform(0.1, 0.5))
                store.set_profile(job.id, gpu_type, PhaseProfile(0.05, 0.1, 0.02, 1, data))
            elif i % 4 == 2:
                store.set_type_aggregated(job.id, gpu_type, 1, rng.uniform(20, 200))
    return store


def best_of(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    rng = random.Random(7)
    cluster = build_cluster()
    jobs = build_jobs(rng)
    store = build_store(rng, jobs)
    settings = Settings()
    lr = get_priority("lr")

    baseline = best_of(lambda: sorted(jobs, key=lambda j: (-j.wait_time, j.submit_time, j.id)))

    def cold_order() -> None:
        ctx = PriorityContext(0.0, cluster, Estimator(cluster, store, settings), len(jobs))
        order_jobs(jobs, lr, ctx)

    warm_ctx = PriorityContext(0.0, cluster, Estimator(cluster, store, settings), len(jobs))
    order_jobs(jobs, lr, warm_ctx)
    cold = best_of(cold_order)
    warm = best_of(lambda: order_jobs(jobs, lr, warm_ctx))

    nodes = cluster.nodes_of_type("rtx3090")
    configs = [Configuration.of("rtx3090", {nodes[0].id: g}) for g in (1, 2, 4, 8)]
    configs += [Configuration.of("rtx3090", {nodes[k].id: 8 for k in range(n)}) for n in (2, 3)]
    calls = len(jobs) * len(configs)

    def cold_throughput() -> None:
        est = Estimator(cluster, store, settings)
        for job in jobs:
            for cfg in configs:
                est.throughput(job, cfg)

    warm_est = Estimator(cluster, store, settings)
    for job in jobs:
        for cfg in configs:
            warm_est.throughput(job, cfg)

    def warm_throughput() -> None:
        for job in jobs:
            for cfg in configs:
                warm_est.throughput(job, cfg)

    t_cold = best_of(cold_throughput)
    t_warm = best_of(warm_throughput)

    print(f"jobs={len(jobs)} gpus={cluster.total_gpus} nodes={len(cluster.nodes)}")
    print(f"baseline sort by attribute : {baseline * 1e3:8.2f} ms")
    print(f"LR order, fresh estimator  : {cold * 1e3:8.2f} ms  ({cold / baseline:5.1f}x baseline)")
    print(f"LR order, warm estimator   : {warm * 1e3:8.2f} ms  ({warm / baseline:5.1f}x baseline)")
    for label, seconds in (("fresh   ", t_cold), ("memoised", t_warm)):
        per_call_us = seconds / calls * 1e6
        print(f"throughput x{calls}, {label}: {seconds * 1e3:8.2f} ms  ({per_call_us:.2f} us/call)")


if __name__ == "__main__":
    main()
