"""The simulated cluster: the core's :class:`Cluster` plus what only the simulator knows.

Every node carries a hidden data-loading factor (older hosts load data more
slowly). Node groups give a base factor and a seeded log-normal spread, so two
servers with the same GPU model differ a little, and a group of older hosts a lot.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Cluster, GpuType, Node


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``count`` identical servers named ``{prefix}{index:02d}``."""

    prefix: str
    count: int
    gpu_type: str
    gpus: int
    server_model: str = ""
    data_factor: float = 1.0
    data_factor_spread: float = 0.0

    def __post_init__(self) -> None:
        if not self.prefix:
            raise InvalidInputError("a node group needs a prefix")
        if self.count <= 0 or self.gpus <= 0:
            raise InvalidInputError(f"node group {self.prefix!r}: count and gpus must be > 0")
        if self.data_factor <= 0 or self.data_factor_spread < 0:
            raise InvalidInputError(
                f"node group {self.prefix!r}: data_factor > 0 and data_factor_spread >= 0"
            )


@dataclass(frozen=True)
class SimCluster:
    """A cluster as the scheduler sees it, with the hidden per-node factors beside it.

    ``compute_as`` maps a GPU type to the type whose compute speed it shares
    (e.g. an RTX3090 in a server on a slower network computes like any RTX3090).
    """

    cluster: Cluster
    data_factors: Mapping[str, float]
    compute_as: Mapping[str, str] = field(default_factory=dict)


def build_sim_cluster(
    types: Sequence[GpuType],
    groups: Sequence[NodeGroup],
    seed: int = 0,
    compute_as: Mapping[str, str] | None = None,
) -> SimCluster:
    """Expand node groups into nodes, drawing each node's hidden factor from ``seed``."""
    rng = random.Random(f"cluster-{seed}")
    nodes: list[Node] = []
    factors: dict[str, float] = {}
    for group in groups:
        for index in range(group.count):
            node_id = f"{group.prefix}{index:02d}"
            nodes.append(Node(node_id, group.gpu_type, group.gpus, group.server_model))
            spread = rng.gauss(0.0, group.data_factor_spread) if group.data_factor_spread else 0.0
            factors[node_id] = group.data_factor * math.exp(spread)
    cluster = Cluster.build(types, nodes)
    aliases = dict(compute_as or {})
    for alias, target in aliases.items():
        if alias not in cluster.gpu_types or target not in cluster.gpu_types:
            raise InvalidInputError(f"compute_as {alias!r} -> {target!r} names an unknown type")
    return SimCluster(cluster, factors, aliases)
