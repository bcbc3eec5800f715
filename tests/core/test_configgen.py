"""Configuration generation: aggregated fits, consecutive distributed walks, equivalence groups."""

from __future__ import annotations

import pytest
from config_space import generate_configurations
from hypothesis import given, settings
from hypothesis import strategies as st

from hopsd.core.configgen import TypeLayout, shared_layout
from hopsd.core.errors import UnknownGpuTypeError
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


def test_high_sensitivity_gets_no_split_for_a_count_a_node_holds() -> None:
    c = cluster(4, 4, 4)
    free = {"a1": 4, "a2": 2, "a3": 4}
    got = placements(generate_configurations(job(2, 4, 6), "t", free, c, high_sensitivity=True))
    # 4 is not split although a2 cannot hold it; 6, which no node holds, is
    assert got[:5] == [{"a1": 2}, {"a2": 2}, {"a3": 2}, {"a1": 4}, {"a3": 4}]
    assert got[5:] == [{"a1": 4, "a2": 2}, {"a2": 2, "a3": 4}]


def test_high_sensitivity_with_a_small_minimum_still_gets_counts_beyond_a_node() -> None:
    """yolov3 on Sia's T4 servers (4 GPUs each) asks 1-16 GPUs: split only past 4."""
    c = cluster(4, 4, 4, 4)
    got = placements(generate_configurations(job(1, 4, 8), "t", {}, c, high_sensitivity=True))
    assert {"a1": 4, "a2": 4} in got
    assert all(len(p) == 1 for p in got if sum(p.values()) <= 4)


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


def test_an_unknown_gpu_type_is_refused_with_a_typed_error() -> None:
    with pytest.raises(UnknownGpuTypeError):
        TypeLayout(cluster(4), "nope", {})


def _reference_groups(
    layout: object,
    job_: Job,
    sensitive: bool,
    distinct: frozenset[str],
    keep: int | None,
    offset: int,
) -> list[tuple[int, tuple[Configuration, ...]]]:
    """Every candidate re-grouped by its nodes' classes, a node the job is known on being
    a class of its own; groups in order of first appearance, ``keep`` members from
    ``offset`` on. The way groups were built before the shared groups were reused."""

    assert isinstance(layout, TypeLayout)
    out = []
    for g in job_.demands:
        if g > layout.total_idle:
            break
        split = not sensitive or job_.min_demand > layout.max_node_gpus or g > layout.max_node_gpus
        for distributed in [False, True] if split else [False]:
            if distributed:
                candidates = layout._walk(g)
            else:
                candidates = [((i, g),) for i in range(len(layout.nodes)) if layout.idle[i] >= g]
            groups: dict[tuple[object, ...], list[tuple[tuple[int, int], ...]]] = {}
            for parts in candidates:
                key = tuple(
                    (
                        layout.nodes[i].id
                        if layout.nodes[i].id in distinct
                        else (layout.idle[i], layout.settled[i]),
                        n,
                    )
                    for i, n in parts
                )
                groups.setdefault(key, []).append(parts)
            for members in groups.values():
                if keep is None or keep >= len(members):
                    chosen = members
                else:
                    chosen = [members[(offset + r) % len(members)] for r in range(keep)]
                configs = tuple(
                    Configuration(
                        layout.gpu_type, tuple(sorted((layout.nodes[i].id, n) for i, n in p))
                    )
                    for p in chosen
                )
                out.append((g, configs))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), min_size=1, max_size=12),
    st.sets(st.integers(1, 16), min_size=1, max_size=4),
    st.sets(st.integers(0, 11), max_size=3),
    st.sampled_from((None, 1, 2, 3)),
    st.integers(0, 20),
    st.booleans(),
)
def test_groups_of_a_job_known_on_some_nodes_match_regrouping_every_candidate(
    idle_settled: list[tuple[int, int]],
    demands: set[int],
    known: set[int],
    keep: int | None,
    offset: int,
    split: bool,
) -> None:

    c = Cluster.build([GpuType("t")], [Node(f"n{i:02d}", "t", 8) for i in range(len(idle_settled))])
    free = {f"n{i:02d}": idle for i, (idle, _) in enumerate(idle_settled)}
    settled = {f"n{i:02d}": min(s, idle) for i, (idle, s) in enumerate(idle_settled)}
    layout = TypeLayout(c, "t", free, settled)
    j = Job("j", tuple(sorted(demands)), 1e6)
    distinct = frozenset(f"n{i:02d}" for i in known)
    for _ in range(2):  # the second call answers from the shared cache
        got = layout.groups(j, not split, distinct=distinct, per_group=keep, offset=offset)
        want = _reference_groups(layout, j, not split, distinct, keep, offset)
        assert [(g.gpus, g.configs) for g in got] == want


def test_shared_layout_is_reused_only_for_the_same_cluster_type_and_gpus() -> None:
    c = cluster(4, 4, 8)
    free = {"a1": 2, "a2": 4, "a3": 8}
    first = shared_layout(c, "t", free)
    assert shared_layout(c, "t", dict(free)) is first
    assert shared_layout(c, "t", {**free, "a1": 1}) is not first  # other idle GPUs
    assert shared_layout(c, "t", free, {"a1": 0, "a2": 4, "a3": 8}) is not first  # settled
    twin = cluster(4, 4, 8)  # equal, but another cluster object
    assert shared_layout(twin, "t", free) is not first
    expected = TypeLayout(c, "t", free).groups(job(2, 4), False)
    assert [g.configs for g in first.groups(job(2, 4), False)] == [g.configs for g in expected]
