"""The managed inventory: one rule for hopsd, `hops submit` and `hops status`."""

from __future__ import annotations

from hopsd.core.inventory import NodeFacts, gpus_per_type, managed_nodes, managed_partitions

# As on the test cluster: one partition per type, `all` and `hops` spanning every node,
# plus an untyped node and a partition mixing types.
NODES = [
    NodeFacts("k80n1", "k80", 2, ("k80", "all", "hops")),
    NodeFacts("v100n1", "v100", 4, ("v100", "all", "hops")),
    NodeFacts("v100n2", "v100", 4, ("v100", "all", "hops")),
    NodeFacts("a100n1", "a100", 4, ("a100", "all", "hops", "mixed")),
    NodeFacts("cpu1", "", 0, ("all", "hops", "mixed")),
]


def test_without_configured_partitions_only_single_type_ones_are_managed() -> None:
    assert managed_partitions(NODES, (), {}) == ("a100", "k80", "v100")
    managed = managed_nodes(NODES, (), {})
    assert [(m.name, m.partition) for m in managed] == [
        ("a100n1", "a100"),
        ("k80n1", "k80"),
        ("v100n1", "v100"),
        ("v100n2", "v100"),
    ]
    assert gpus_per_type(managed) == {"a100": 4, "k80": 2, "v100": 8}


def test_configured_partitions_win_and_each_node_is_managed_once() -> None:
    managed = managed_nodes(NODES, ("v100", "all"), {})
    assert [(m.name, m.partition) for m in managed] == [
        ("v100n1", "v100"),
        ("v100n2", "v100"),
        ("a100n1", "all"),
        ("k80n1", "all"),
    ]  # the untyped node never counts


def test_node_type_overrides_apply_before_the_single_type_test() -> None:
    # calling v100n2 a "v100s" splits the v100 partition: it is no longer single-typed
    managed = managed_nodes(NODES, (), {"v100n2": "v100s"})
    assert "v100" not in {m.partition for m in managed}
    assert gpus_per_type(managed) == {"a100": 4, "k80": 2}
