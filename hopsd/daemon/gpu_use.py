"""GPUs per type as an operator watches them: total, busy, idle, and queued demand.

Derived from the tick's snapshot so the gauges say what the planner saw. A GPU
is idle when hops could hand it out now (its node's usable capacity minus what
hops jobs hold); everything else of the type is busy (hops jobs, jobs hops does
not manage, drained nodes). Jobs are not tied to a type, so a type's queued
demand is the smallest GPU count of each waiting job that the type could hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopsd.core.capacity import free_gpus, held_gpus, node_capacity, node_sizes, per_type
from hopsd.core.snapshot import Snapshot


@dataclass(frozen=True)
class GpuUse:
    total: int = 0
    busy: int = 0
    idle: int = 0
    queued_demand: int = 0


def gpu_use(snapshot: Snapshot) -> dict[str, GpuUse]:
    """Per GPU type of the snapshot's cluster (types without nodes are left out)."""
    held = held_gpus(j.current for j in snapshot.running if j.current is not None)
    cluster = snapshot.cluster
    total = per_type(cluster, node_sizes(cluster))
    idle = per_type(cluster, free_gpus(node_capacity(snapshot), held))
    out: dict[str, GpuUse] = {}
    for gpu_type in dict.fromkeys(n.gpu_type for n in cluster.nodes):
        size = total[gpu_type]
        demand = sum(j.min_demand for j in snapshot.queued if j.min_demand <= size)
        out[gpu_type] = GpuUse(size, size - idle[gpu_type], idle[gpu_type], demand)
    return out
