"""GPUs per type as an operator watches them: total, busy, idle, and queued demand.

Derived from the tick's snapshot so the gauges say what the planner saw. A GPU
is idle when hops could hand it out now (its node's usable capacity minus what
hops jobs hold); everything else of the type is busy (hops jobs, jobs hops does
not manage, drained nodes). Jobs are not tied to a type, so a type's queued
demand is the smallest GPU count of each waiting job that the type could hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopsd.core.snapshot import Snapshot


@dataclass(frozen=True)
class GpuUse:
    total: int = 0
    busy: int = 0
    idle: int = 0
    queued_demand: int = 0


def gpu_use(snapshot: Snapshot) -> dict[str, GpuUse]:
    """Per GPU type of the snapshot's cluster (types without nodes are left out)."""
    held: dict[str, int] = {}
    for job in snapshot.running:
        assert job.current is not None
        for node_id, gpus in job.current.parts:
            held[node_id] = held.get(node_id, 0) + gpus
    total: dict[str, int] = {}
    idle: dict[str, int] = {}
    for node in snapshot.cluster.nodes:
        total[node.gpu_type] = total.get(node.gpu_type, 0) + node.gpus
        free = max(snapshot.capacity_of(node.id) - held.get(node.id, 0), 0)
        idle[node.gpu_type] = idle.get(node.gpu_type, 0) + free
    out: dict[str, GpuUse] = {}
    for gpu_type, size in total.items():
        demand = sum(j.min_demand for j in snapshot.queued if j.min_demand <= size)
        out[gpu_type] = GpuUse(size, size - idle[gpu_type], idle[gpu_type], demand)
    return out
