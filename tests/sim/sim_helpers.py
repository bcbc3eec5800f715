"""Tiny literal clusters, models and traces shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hopsd.core.model import Cluster, GpuType, Node, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.sim.cluster_file import parse_cluster
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.profiles import parse_profiles
from hopsd.sim.run import simulate
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec

TINY_CLUSTER = {
    "gpu_types": {
        "fast": {"b_link": 4e9, "b_net": 1e9, "speed": 2.0},
        "slow": {"b_link": 4e9, "b_net": 1e9, "speed": 1.0},
    },
    "node_groups": [
        {"prefix": "f", "count": 1, "gpu_type": "fast", "gpus": 4},
        {"prefix": "s", "count": 2, "gpu_type": "slow", "gpus": 4},
    ],
}

# A compute-bound toy model: no data time, tiny all-reduce, so scaling is near linear.
TOY_MODELS = {
    "models": {
        "toy": {"params": 1e3, "batch_size": 10, "throughput": {"fast": 20.0, "slow": 10.0}},
        "other": {"params": 1e3, "batch_size": 10, "throughput": {"fast": 40.0, "slow": 10.0}},
    }
}


Group = tuple[str, int, str, int]


def cluster_toml(types: Mapping[str, Mapping[str, float]], *groups: Group) -> str:
    """A cluster file's text: each GPU type's keys, then the ``(prefix, count, gpu_type,
    gpus)`` node groups in their order (the order nodes are numbered and fitted in)."""
    lines: list[str] = []
    for name, keys in types.items():
        lines += [f"[gpu_types.{name}]", *(f"{key} = {value!r}" for key, value in keys.items())]
    for prefix, count, gpu_type, gpus in groups:
        lines += ["[[node_groups]]", f'prefix = "{prefix}"', f"count = {count}"]
        lines += [f'gpu_type = "{gpu_type}"', f"gpus = {gpus}"]
    return "\n".join(lines) + "\n"


def cluster_of(*nodes: tuple[str, str, int]) -> Cluster:
    """A cluster of ``(name, gpu_type, gpus)`` nodes, its types in name order."""
    types = sorted({t for _, t, _ in nodes})
    return Cluster.build([GpuType(t) for t in types], [Node(i, t, g) for i, t, g in nodes])


def store_of(rates: dict[tuple[str, str, int], float]) -> InMemoryThroughputStore:
    """A throughput store of per-GPU rates keyed ``(job, gpu_type, gpus)``."""
    store = InMemoryThroughputStore()
    for (job, gpu_type, gpus), per_gpu in rates.items():
        store.set_type_aggregated(job, gpu_type, gpus, per_gpu)
    return store


def tiny_truth(seed: int = 0) -> GroundTruth:
    sim = parse_cluster(TINY_CLUSTER, "tiny", seed=seed)
    return GroundTruth(sim.cluster, parse_profiles(TOY_MODELS), sim.data_factors)


def tiny_jobs() -> list[JobSpec]:
    """Six jobs arriving over ten minutes; sizes of a few minutes to an hour."""
    return [
        JobSpec("a", 0.0, (1, 2, 4), 60_000.0, "toy", "u1"),
        JobSpec("b", 0.0, (2,), 40_000.0, "other", "u2"),
        JobSpec("c", 120.0, (1,), 8_000.0, "toy", "u1"),
        JobSpec("d", 200.0, (4, 8), 90_000.0, "other", "u3"),
        JobSpec("e", 400.0, (1, 2), 5_000.0, "toy", "u2"),
        JobSpec("f", 600.0, (2, 3, 4), 30_000.0, "other", "u3"),
    ]


def assert_replays_under_every_policy(
    cluster: Path, trace: Path, profiles: Path, trace_format: str, n_jobs: int
) -> None:
    """The trace, read in its format, replays to a positive makespan under each policy."""
    out = simulate(
        None,
        cluster=cluster,
        trace=trace,
        profiles=profiles,
        policies=["hops", "gavel", "sia", "fifo"],
        trace_format=trace_format,
    )
    assert out["n_jobs"] == n_jobs and out["trace_format"] == trace_format
    assert all(f["makespan_h"] > 0 for f in out["policies"].values())


class ScriptedPolicy:
    """A policy that answers each instant, round or fragment, with the plan scripted for it,
    once (and with no change at any other instant)."""

    name = "scripted"

    def __init__(self, plans: dict[float, Plan]) -> None:
        self.plans = plans

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return self.plans.pop(snapshot.now, Plan())

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return self.plans.pop(snapshot.now, Plan())


def notice_config(grace: float, max_rounds: int, round_s: float = 10.0) -> EngineConfig:
    """An engine for scripted plans under a checkpoint notice of ``grace`` seconds: rounds of
    ``round_s``, moves and preemptions free of restart cost, no profiling phase."""
    return EngineConfig(
        settings=Settings(round_length_s=round_s, restart_penalty_s=0.0),
        profile_s=0.0,
        partial=True,
        max_rounds=max_rounds,
        notice_grace_s=grace,
    )
