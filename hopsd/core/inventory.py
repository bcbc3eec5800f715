"""Which nodes hops manages, and the GPU type of each: one rule for hopsd and the CLI.

A node is managed when it is in a managed partition: the partitions hops.conf
lists, or, when it lists none, every partition whose nodes all carry one GPU
type (so the node list of a placement pins the type, which Slurm cannot change
on a pending job). A node's type is Slurm's typed GRES (``gpu:a100:4``) unless
hops.conf's ``node_types`` overrides it; untyped nodes are never managed. Each
node is managed once, under the first managed partition that holds it.
``hopsd`` plans on these nodes, ``hops submit`` refuses demands none of their
types can hold, ``hops status`` sums them per type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What Slurm says of a node that the rule needs."""

    name: str
    gpu_type: str
    gpus: int
    partitions: tuple[str, ...]


class ListedNode(Protocol):
    """A node as a Slurm port lists it (``hopsd.slurm.port.SlurmNode``), what the rule reads."""

    @property
    def name(self) -> str: ...
    @property
    def gpu_type(self) -> str | None: ...
    @property
    def gpus_total(self) -> int: ...
    @property
    def partitions(self) -> tuple[str, ...]: ...


def facts_of(nodes: Iterable[ListedNode]) -> list[NodeFacts]:
    """The facts the rule needs of each listed node (no GPU type: "")."""
    return [NodeFacts(n.name, n.gpu_type or "", n.gpus_total, tuple(n.partitions)) for n in nodes]


@dataclass(frozen=True, slots=True)
class ManagedNode:
    """A node hops manages: its type and the partition that pins that type."""

    name: str
    gpu_type: str
    gpus: int
    partition: str


def node_type(node: NodeFacts, node_types: Mapping[str, str]) -> str:
    """The node's GPU type: hops.conf's override, else Slurm's typed GRES ("" if untyped)."""
    return node_types.get(node.name) or node.gpu_type


def managed_partitions(
    nodes: Iterable[NodeFacts], partitions: Sequence[str], node_types: Mapping[str, str]
) -> tuple[str, ...]:
    """The configured partitions, or every partition whose nodes all carry one GPU type."""
    if partitions:
        return tuple(partitions)
    types: dict[str, set[str]] = {}
    for node in nodes:
        for part in node.partitions:
            types.setdefault(part, set()).add(node_type(node, node_types))
    return tuple(sorted(p for p, ts in types.items() if len(ts) == 1 and "" not in ts))


def managed_nodes(
    nodes: Sequence[NodeFacts], partitions: Sequence[str], node_types: Mapping[str, str]
) -> list[ManagedNode]:
    """Every managed node once, in partition order then by name (the cluster's node order)."""
    out: list[ManagedNode] = []
    seen: set[str] = set()
    for part in managed_partitions(nodes, partitions, node_types):
        for node in sorted(nodes, key=lambda n: n.name):
            kind = node_type(node, node_types)
            if part not in node.partitions or node.name in seen or not kind or node.gpus <= 0:
                continue
            seen.add(node.name)
            out.append(ManagedNode(node.name, kind, node.gpus, part))
    return out


def gpus_per_type(nodes: Iterable[ManagedNode]) -> dict[str, int]:
    """GPUs of each managed type: the largest demand a single-type placement can hold."""
    totals: dict[str, int] = {}
    for node in nodes:
        totals[node.gpu_type] = totals.get(node.gpu_type, 0) + node.gpus
    return totals


def partitions_for_types(
    nodes: Sequence[ManagedNode], types: Sequence[str], exclude_types: Sequence[str]
) -> tuple[str, ...]:
    """The managed partitions whose GPU type a job may use, in the cluster's order.

    A job is submitted to these only, so Slurm itself keeps it off other types
    even if its owner releases it before hopsd adopts it.
    """
    out: list[str] = []
    for node in nodes:
        allowed = (not types or node.gpu_type in types) and node.gpu_type not in exclude_types
        if allowed and node.partition not in out:
            out.append(node.partition)
    return tuple(out)
