"""The small cluster the step tests plan on: four slow k80 GPUs and four fast a100s.

Two types of different speed on one node each, so a plan can prefer, move and
spare by type; one place for it so the tests speak of the same cluster.
"""

from __future__ import annotations

from hopsd.core.model import Cluster, Configuration, GpuType, Node
from hopsd.core.settings import Settings

CLUSTER = Cluster.build(
    [GpuType("k80", speed=1.0), GpuType("a100", speed=4.0)],
    [Node("k1", "k80", 4), Node("a1", "a100", 4)],
)
SETTINGS = Settings(round_length_s=100.0, time_limit_s=5.0)


def cfg(node: str, gpus: int) -> Configuration:
    """``gpus`` GPUs on ``node``, of the node's type."""
    return Configuration(CLUSTER.node(node).gpu_type, ((node, gpus),))
