"""Configuration generation: aggregated fits, consecutive distributed walks, equivalence groups."""

from __future__ import annotations

import pytest

from hopsd.core.configgen import generate_configurations
from hopsd.core.errors import InvalidInputError, UnknownGpuTypeError
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node


def cluster(*sizes: int) -> Cluster:
    nodes = [Node(f"a{i + 1}", "t", s) for i, s in enumerate(sizes)]
    return Cluster.build([GpuType("t"), GpuType("u")], [*nodes, Node("u1", "u", 8)])


def job(*demands: int) -> Job:
    return Job(id="j", demands=tuple(demands), total_samples=1e6)


def placements(configs: list[Configuration]) -> list[dict[str, int]]:
    """Placements in a canonical order (groups come out group by group)."""
    return sorted(
        (c.as_dict() for c in configs), key=lambda d: (sum(d.values()), sorted(d.items()))
    )


def test_hand_worked_mixed_idle_nodes() -> None:
    c = cluster(4, 4, 4)
    free = {"a1": 4, "a2": 2, "a3": 4}
    got = placements(generate_configurations(job(2, 4, 6), "t", free, c, high_sensitivity=False))
    assert got == [
        {"a1": 2},
        {"a2": 2},
        {"a3": 2},
        {"a1": 4},  # a full node is a valid fit (R_k <= S_t)
        {"a2": 2, "a3": 2},  # R=4 from a2 does not fit a2 alone: walk on to a3
        {"a3": 4},
        {"a1": 4, "a2": 2},  # walk from a1: fill a1, then a2
        {"a2": 2, "a3": 4},  # walk from a2; from a3 only 4 GPUs remain -> stop
    ]
    assert len(generate_configurations(job(2, 4, 6), "t", free, c, False)) == 8  # no duplicates


def test_high_sensitivity_gets_no_split_when_its_minimum_fits_a_node() -> None:
    c = cluster(4, 4, 4)
    free = {"a1": 4, "a2": 2, "a3": 4}
    got = placements(generate_configurations(job(2, 4, 6), "t", free, c, high_sensitivity=True))
    assert got == [{"a1": 2}, {"a2": 2}, {"a3": 2}, {"a1": 4}, {"a3": 4}]


def test_high_sensitivity_splits_when_its_minimum_exceeds_every_node() -> None:
    c = cluster(8, 8, 8)
    got = placements(generate_configurations(job(12), "t", {}, c, high_sensitivity=True))
    assert got == [{"a1": 8, "a2": 4}, {"a2": 8, "a3": 4}]


def test_busy_nodes_are_skipped_when_walking_consecutive_nodes() -> None:
    c = cluster(4, 4, 4)
    free = {"a1": 3, "a2": 0, "a3": 3}
    got = placements(generate_configurations(job(6), "t", free, c, high_sensitivity=False))
    assert got == [{"a1": 3, "a3": 3}]


def test_demand_larger_than_idle_gpus_of_the_type_gives_nothing() -> None:
    c = cluster(4, 4)
    assert generate_configurations(job(16), "t", {}, c, high_sensitivity=False) == []


def test_equivalent_nodes_are_cut_to_rotating_representatives() -> None:
    c = cluster(8, 8, 8, 8)
    full = generate_configurations(job(4), "t", {}, c, high_sensitivity=False)
    assert len(full) == 4
    first = generate_configurations(job(4), "t", {}, c, False, per_group=1, offset=0)
    second = generate_configurations(job(4), "t", {}, c, False, per_group=1, offset=1)
    assert placements(first) == [{"a1": 4}]
    assert placements(second) == [{"a2": 4}]


def test_nodes_with_other_idle_counts_or_entity_knowledge_form_their_own_groups() -> None:
    c = cluster(8, 8, 8, 8)
    free = {"a1": 8, "a2": 8, "a3": 6, "a4": 8}
    got = generate_configurations(
        job(4), "t", free, c, False, per_group=1, distinct=frozenset({"a2"})
    )
    assert placements(got) == [{"a1": 4}, {"a2": 4}, {"a3": 4}]


def test_bad_input_is_refused_with_typed_errors() -> None:
    c = cluster(4)
    with pytest.raises(UnknownGpuTypeError):
        generate_configurations(job(1), "nope", {}, c, False)
    with pytest.raises(InvalidInputError, match="negative"):
        generate_configurations(job(1), "t", {"a1": -1}, c, False)
    with pytest.raises(InvalidInputError, match="unknown node"):
        generate_configurations(job(1), "t", {"zz": 1}, c, False)
    with pytest.raises(InvalidInputError, match="only 4 exist"):
        generate_configurations(job(1), "t", {"a1": 5}, c, False)
