"""Free GPUs, defined once: headroom shows overbooking, free GPUs never go below zero."""

from __future__ import annotations

from hopsd.core.capacity import free_gpus, headroom, held_gpus, left, node_sizes, per_type
from hopsd.core.model import Cluster, Configuration, GpuType, Node

CLUSTER = Cluster.build(
    [GpuType("k80"), GpuType("a100"), GpuType("v100")],
    [Node("k1", "k80", 4), Node("a1", "a100", 4), Node("a2", "a100", 2)],
)


def test_placements_sharing_a_node_add_up() -> None:
    configs = [Configuration("a100", (("a1", 2),)), Configuration("a100", (("a1", 1), ("a2", 2)))]
    assert held_gpus(configs) == {"a1": 3, "a2": 2}


def test_headroom_shows_by_how_much_a_node_is_overbooked_and_free_gpus_do_not() -> None:
    capacity = node_sizes(CLUSTER)
    held = {"k1": 1, "a2": 3}
    assert headroom(capacity, held) == {"k1": 3, "a1": 4, "a2": -1}
    assert free_gpus(capacity, held) == {"k1": 3, "a1": 4, "a2": 0}
    assert left(2, 3) == 0 and left(4, 1) == 3


def test_per_type_sums_nodes_and_lists_types_without_nodes() -> None:
    assert per_type(CLUSTER, node_sizes(CLUSTER)) == {"k80": 4, "a100": 6, "v100": 0}
    assert per_type(CLUSTER, {"a2": 1}) == {"k80": 0, "a100": 1, "v100": 0}
