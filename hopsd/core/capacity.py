"""Free GPUs: what a node may give minus what jobs hold on it, defined once.

The scheduling step, the policies, the round planner, the simulator, hopsd's
snapshot and its GPU figures all ask how many GPUs are free on a node or of a
type. Each used to do the subtraction itself; here is the one place it is done,
so "free" means the same to the planner that hands GPUs out and to the page
that tells users how many are idle.

Two answers are kept apart on purpose: :func:`headroom` may be negative (a
plan or a pinned placement that overbooks a node must show by how much, so it
can be refused), :func:`free_gpus` never is (a count of GPUs one could hand out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hopsd.core.model import Cluster, Configuration
    from hopsd.core.snapshot import Snapshot


def held_gpus(configs: Iterable[Configuration]) -> dict[str, int]:
    """GPUs per node that the given placements take together (jobs sharing a node add up)."""
    held: dict[str, int] = {}
    for config in configs:
        for node_id, gpus in config.parts:
            held[node_id] = held.get(node_id, 0) + gpus
    return held


def headroom(capacity: Mapping[str, int], held: Mapping[str, int]) -> dict[str, int]:
    """Per node of ``capacity``: what it may give minus what ``held`` takes (< 0: overbooked)."""
    return {node_id: gpus - held.get(node_id, 0) for node_id, gpus in capacity.items()}


def left(capacity: int, held: int) -> int:
    """GPUs left of ``capacity`` once ``held`` are taken, never below zero."""
    return max(capacity - held, 0)


def free_gpus(capacity: Mapping[str, int], held: Mapping[str, int]) -> dict[str, int]:
    """Per node of ``capacity``: GPUs nobody holds, never below zero (a count one can hand out)."""
    return {node_id: left(gpus, held.get(node_id, 0)) for node_id, gpus in capacity.items()}


def node_capacity(snapshot: Snapshot) -> dict[str, int]:
    """GPUs each node of the snapshot's cluster may give this round (in the cluster's order)."""
    return {n.id: snapshot.capacity_of(n.id) for n in snapshot.cluster.nodes}


def node_sizes(cluster: Cluster) -> dict[str, int]:
    """Every GPU of each node, whoever holds it (in the cluster's order)."""
    return {n.id: n.gpus for n in cluster.nodes}


def per_type(cluster: Cluster, per_node: Mapping[str, int]) -> dict[str, int]:
    """A per-node count summed per GPU type; every type of the cluster is listed, 0 if none.

    Placements never span types, so what a job of one type can get is this
    sum, not the cluster's total.
    """
    out = {gpu_type: 0 for gpu_type in cluster.gpu_types}
    for node in cluster.nodes:
        out[node.gpu_type] = out.get(node.gpu_type, 0) + per_node.get(node.id, 0)
    return out
