"""Eqs. 1-5, the slowest-node rule and the top-down lookup of the throughput estimator."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopsd.core.errors import InvalidInputError, UnknownGpuTypeError
from hopsd.core.estimator import (
    Estimate,
    Estimator,
    communication_time,
    expected_iteration_time,
)
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.settings import Settings
from hopsd.core.throughput import InMemoryThroughputStore, Mixture, PhaseProfile

# The worked example used throughout: t_f=0.1, t_b=0.2, t_u=0.05, params=1e8,
# B_link=1e9, on 4 GPUs of one node:
#   T_c  = 1e8 / 1e9 * (4-1)/4         = 0.075 s
#   Tc~  = 0.2 * 0.075                  = 0.015 s
#   max(T_b + Tc~, T_c) + T_u = max(0.215, 0.075) + 0.05 = 0.265 s
PARAMS = 1e8
B_LINK = 1e9
B_NET = 5e8


def iteration_time(
    p: PhaseProfile,
    params: float,
    config: Configuration,
    b_link: float,
    b_net: float,
    overlap: float = 0.2,
) -> float:
    """E[T_iter] in ``config``: the estimator's formula on its GPU and node counts."""
    return expected_iteration_time(
        p, params, config.total_gpus, config.n_nodes, b_link, b_net, overlap
    )


def profile(pattern: int = 1, t_d: float = 0.3, t_w: float = 0.01) -> PhaseProfile:
    return PhaseProfile(
        t_f=0.1,
        t_b=0.2,
        t_u=0.05,
        pattern=pattern,
        data=Mixture.constant(t_d),
        sync_wait=Mixture.constant(t_w),
    )


def one_node(gpus: int = 4) -> Configuration:
    return Configuration.of("A", {"a1": gpus})


def two_nodes(gpus: int = 4) -> Configuration:
    return Configuration.of("A", {"a1": gpus, "a2": gpus})


def cluster() -> Cluster:
    return Cluster.build(
        [GpuType("A", b_link=B_LINK, b_net=B_NET, speed=1.0), GpuType("B", speed=2.0)],
        [
            Node("a1", "A", 8),
            Node("a2", "A", 8),
            Node("a3", "A", 8),
            Node("b1", "B", 8),
        ],
    )


def job(job_id: str = "j1", batch_size: int = 32) -> Job:
    return Job(job_id, (1, 2, 4), total_samples=1e6, batch_size=batch_size, params=PARAMS)


def estimator(store: InMemoryThroughputStore, **settings: float) -> Estimator:
    return Estimator(cluster(), store, Settings(**settings))  # type: ignore[arg-type]


# --- eqs. 1-5 ---------------------------------------------------------------


def test_ring_allreduce_on_one_node() -> None:
    # 1e8 / 1e9 * 3/4 = 0.075
    assert communication_time(PARAMS, 4, 1, B_LINK, B_NET) == pytest.approx(0.075)


def test_one_gpu_never_communicates() -> None:
    assert communication_time(PARAMS, 1, 1, B_LINK, B_NET) == 0.0


def test_network_across_nodes_ignores_gpu_count() -> None:
    # 1e8 / 5e8 = 0.2 for any GPU count once the job spans nodes
    assert communication_time(PARAMS, 8, 2, B_LINK, B_NET) == pytest.approx(0.2)
    assert communication_time(PARAMS, 16, 4, B_LINK, B_NET) == pytest.approx(0.2)


def test_pattern_1_data_bound() -> None:
    # max(T_d=0.3, 0.265) + T_f 0.1 + T_w 0.01 = 0.41
    t = iteration_time(profile(1, t_d=0.3), PARAMS, one_node(), B_LINK, B_NET)
    assert t == pytest.approx(0.41)


def test_pattern_1_compute_bound() -> None:
    # max(T_d=0.1, 0.265) + 0.1 + 0.01 = 0.375
    t = iteration_time(profile(1, t_d=0.1), PARAMS, one_node(), B_LINK, B_NET)
    assert t == pytest.approx(0.375)


def test_pattern_2_adds_data_time() -> None:
    # 0.3 + 0.265 + 0.1 + 0.01 = 0.675
    t = iteration_time(profile(2, t_d=0.3), PARAMS, one_node(), B_LINK, B_NET)
    assert t == pytest.approx(0.675)


def test_communication_bound_when_model_is_large() -> None:
    # params 1e9: T_c = 0.75, Tc~ = 0.15; max(0.35, 0.75) + 0.05 = 0.8
    # pattern 1 with T_d=0, T_w=0: max(0, 0.8) + 0.1 = 0.9
    t = iteration_time(profile(1, t_d=0.0, t_w=0.0), 1e9, one_node(), B_LINK, B_NET)
    assert t == pytest.approx(0.9)


def test_distributed_uses_network_bandwidth() -> None:
    # T_c = 1e8/5e8 = 0.2, Tc~ = 0.04; max(0.24, 0.2) + 0.05 = 0.29
    # pattern 2, T_d 0.05, T_w 0: 0.05 + 0.29 + 0.1 = 0.44
    t = iteration_time(profile(2, t_d=0.05, t_w=0.0), PARAMS, two_nodes(), B_LINK, B_NET)
    assert t == pytest.approx(0.44)


def test_overlap_share_is_a_parameter() -> None:
    # overlap 1.0: Tc~ = 0.075; max(0.275, 0.075) + 0.05 = 0.325; pattern 2, T_d=T_w=0: 0.425
    t = iteration_time(profile(2, 0.0, 0.0), PARAMS, one_node(), B_LINK, B_NET, 1.0)
    assert t == pytest.approx(0.425)


def mixed_profile(pattern: int) -> PhaseProfile:
    return PhaseProfile(
        t_f=0.1,
        t_b=0.2,
        t_u=0.05,
        pattern=pattern,
        data=Mixture(0.75, 0.1, 0.01, 0.5, 0.05),
        sync_wait=Mixture(0.75, 0.02, 0.0, 0.06, 0.0),
    )


def test_mixture_pattern_1_takes_expectation_over_branches() -> None:
    # hit:  max(0.1, 0.265) + 0.1 + 0.02 = 0.385
    # miss: max(0.5, 0.265) + 0.1 + 0.06 = 0.660
    # E = 0.75 * 0.385 + 0.25 * 0.66 = 0.45375
    # (plugging in the mean T_d 0.2 would give 0.395: the max is not linear)
    t = iteration_time(mixed_profile(1), PARAMS, one_node(), B_LINK, B_NET)
    assert t == pytest.approx(0.45375)


def test_mixture_pattern_2() -> None:
    # hit: 0.1 + 0.265 + 0.1 + 0.02 = 0.485; miss: 0.5 + 0.265 + 0.1 + 0.06 = 0.925
    # E = 0.75 * 0.485 + 0.25 * 0.925 = 0.595
    t = iteration_time(mixed_profile(2), PARAMS, one_node(), B_LINK, B_NET)
    assert t == pytest.approx(0.595)


def test_sync_wait_and_data_share_the_hit_event() -> None:
    # Data p_hit 1.0 with distinct means => only the hit branch happens, so the
    # sync wait's own p_hit (0.0) is overridden: T_w = its mu_hit 0.02.
    # max(0.1, 0.265) + 0.1 + 0.02 = 0.385
    p = PhaseProfile(
        0.1, 0.2, 0.05, 1, data=Mixture(1.0, 0.1, 0.0, 0.5), sync_wait=Mixture(0.0, 0.02, 0.0, 0.9)
    )
    assert iteration_time(p, PARAMS, one_node(), B_LINK, B_NET) == pytest.approx(0.385)


def test_sync_wait_mixture_kept_when_data_time_is_constant() -> None:
    # T_d constant 0.1; T_w is 0.0 (p 0.5) or 0.2:
    # hit 0.265 + 0.1 + 0.0 = 0.365, miss 0.265 + 0.1 + 0.2 = 0.565, E = 0.465
    p = PhaseProfile(
        0.1, 0.2, 0.05, 1, data=Mixture.constant(0.1), sync_wait=Mixture(0.5, 0.0, 0.0, 0.2)
    )
    assert iteration_time(p, PARAMS, one_node(), B_LINK, B_NET) == pytest.approx(0.465)


# --- theory layer through the estimator ------------------------------------------


def test_theory_layer_per_gpu_is_batch_over_iteration_time() -> None:
    store = InMemoryThroughputStore()
    store.set_profile("j1", "A", profile(1, t_d=0.3))
    est = estimator(store).throughput(job(batch_size=32), one_node())
    # per GPU 32 / 0.41 = 78.0488; total x 4
    assert est.per_gpu == pytest.approx(32 / 0.41)
    assert est.samples_per_s == pytest.approx(4 * 32 / 0.41)
    assert est.source == "theory"


def test_theory_layer_uses_settings_overlap() -> None:
    store = InMemoryThroughputStore()
    store.set_profile("j1", "A", profile(2, 0.0, 0.0))
    est = estimator(store, tcomm_overlap=1.0).throughput(job(batch_size=17), one_node())
    assert est.per_gpu == pytest.approx(17 / 0.425)


def test_zero_iteration_time_profile_is_refused() -> None:
    store = InMemoryThroughputStore()
    store.set_profile("j1", "A", PhaseProfile(0.0, 0.0, 0.0))
    with pytest.raises(InvalidInputError, match="non-positive iteration time"):
        estimator(store).throughput(job(), Configuration.of("A", {"a1": 1}))


def test_theory_answers_follow_a_replaced_profile_across_estimators() -> None:
    """Estimators share theory answers per profile value: a profile replaced in the
    store by a different one must be answered from, not the old one."""
    store = InMemoryThroughputStore()
    store.set_profile("j1", "A", profile(1, t_d=0.3))
    assert estimator(store).throughput(job(), one_node()).per_gpu == pytest.approx(32 / 0.41)
    store.set_profile("j1", "A", profile(1, t_d=0.5))  # data bound: 0.5 + 0.1 + 0.01
    assert estimator(store).throughput(job(), one_node()).per_gpu == pytest.approx(32 / 0.61)
    other = job(batch_size=64)  # the same profile object, another batch: its own answer
    assert estimator(store).throughput(other, one_node()).per_gpu == pytest.approx(64 / 0.61)


def test_a_profile_read_anew_as_an_equal_object_meets_its_earlier_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hopsd reads every profile from its ledger each tick as a new object: the
    estimators of later ticks answer from the first one's work, not eqs. 1-5 again."""
    import hopsd.core.estimator as module

    computed: list[tuple[int, int]] = []
    original = module._theory_per_gpu

    def counting(*args: object) -> float:
        computed.append((args[3], args[4]))  # type: ignore[arg-type]
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "_theory_per_gpu", counting)
    first_tick = InMemoryThroughputStore()
    first_tick.set_profile("j-reread", "A", profile(1, t_d=0.37))
    answer = estimator(first_tick).throughput(job("j-reread"), one_node()).per_gpu
    assert computed == [(4, 1)]
    next_tick = InMemoryThroughputStore()
    next_tick.set_profile("j-reread", "A", profile(1, t_d=0.37))  # equal, not the same
    assert next_tick.profile("j-reread", "A") is not first_tick.profile("j-reread", "A")
    assert estimator(next_tick).throughput(job("j-reread"), one_node()).per_gpu == answer
    assert computed == [(4, 1)]
    estimator(next_tick).throughput(job("j-reread"), two_nodes())  # a new shape is computed
    assert computed == [(4, 1), (8, 2)]


def test_per_gpu_one_each_is_the_per_gpu_throughput_of_one_gpu_per_node() -> None:
    store = all_layers_store()
    store.set_entity_distributed("j1", "a2", 2, 30.0)
    store.set_type_distributed("j1", "A", 2, 35.0)
    est = estimator(store)
    split = Configuration.of("A", {"a1": 1, "a2": 1})
    for node_id, n_nodes, config in (
        ("a1", 1, Configuration.of("A", {"a1": 1})),
        ("a1", 2, split),
        ("a2", 2, split),
    ):
        expected = est.per_gpu_on_node(job(), node_id, config)[0]
        assert est.per_gpu_one_each(job(), "A", node_id, n_nodes) == expected
    with pytest.raises(InvalidInputError, match="no 'A' GPU"):
        est.per_gpu_one_each(job(), "A", "b1", 1)


# --- lookup order ---------------------------------------------------------------


def all_layers_store() -> InMemoryThroughputStore:
    store = InMemoryThroughputStore()
    store.set_entity_aggregated("j1", "a1", 4, 50.0)
    store.set_type_aggregated("j1", "A", 4, 40.0)
    store.set_profile("j1", "A", profile(1, t_d=0.3))  # 78.05 per GPU
    return store


def test_entity_beats_type_beats_theory_beats_table() -> None:
    store = all_layers_store()
    assert estimator(store).throughput(job(), one_node()) == Estimate(200.0, 50.0, "entity")
    store._entity_agg.clear()
    assert estimator(store).throughput(job(), one_node()) == Estimate(160.0, 40.0, "type")
    store._type_agg.clear()
    assert estimator(store).throughput(job(), one_node()).source == "theory"
    store._profiles.clear()
    # table: reference 100 x speed 1.0 per GPU
    assert estimator(store).throughput(job(), one_node()) == Estimate(400.0, 100.0, "table")


def test_table_scales_with_type_speed() -> None:
    cfg = Configuration.of("B", {"b1": 2})
    est = estimator(InMemoryThroughputStore(), reference_throughput=30.0).throughput(job(), cfg)
    # 30 x speed 2.0 = 60 per GPU, 2 GPUs
    assert est == Estimate(120.0, 60.0, "table")


def test_aggregated_tables_are_keyed_by_gpu_count() -> None:
    store = InMemoryThroughputStore()
    store.set_type_aggregated("j1", "A", 2, 70.0)
    store.set_type_aggregated("j1", "A", 4, 60.0)
    assert estimator(store).throughput(job(), one_node(4)).per_gpu == 60.0
    assert estimator(store).throughput(job(), one_node(2)).per_gpu == 70.0


def test_entity_is_per_node() -> None:
    store = InMemoryThroughputStore()
    store.set_entity_aggregated("j1", "a2", 4, 55.0)
    est = estimator(store)
    assert est.throughput(job(), Configuration.of("A", {"a2": 4})).source == "entity"
    assert est.throughput(job(), one_node()).source == "table"


def test_distributed_configs_use_distributed_tables() -> None:
    store = InMemoryThroughputStore()
    # aggregated entries must be ignored for a two-node configuration
    store.set_entity_aggregated("j1", "a1", 4, 99.0)
    store.set_type_aggregated("j1", "A", 8, 99.0)
    store.set_type_distributed("j1", "A", 2, 35.0)
    assert estimator(store).throughput(job(), two_nodes()) == Estimate(280.0, 35.0, "type")
    store.set_entity_distributed("j1", "a1", 2, 45.0)
    store.set_entity_distributed("j1", "a2", 2, 42.0)
    assert estimator(store).throughput(job(), two_nodes()) == Estimate(336.0, 42.0, "entity")


def test_distributed_table_keyed_by_node_count() -> None:
    store = InMemoryThroughputStore()
    store.set_type_distributed("j1", "A", 3, 20.0)
    est = estimator(store)
    assert est.throughput(job(), two_nodes()).source == "table"
    three = Configuration.of("A", {"a1": 2, "a2": 2, "a3": 2})
    assert est.throughput(job(), three) == Estimate(120.0, 20.0, "type")


# --- slowest-node rule ------------------------------------------------------------


def test_slowest_node_sets_the_pace() -> None:
    store = InMemoryThroughputStore()
    store.set_entity_distributed("j1", "a1", 2, 50.0)
    store.set_entity_distributed("j1", "a2", 2, 30.0)
    cfg = Configuration.of("A", {"a1": 4, "a2": 2})
    # min(50, 30) x (4 + 2) = 180
    assert estimator(store).throughput(job(), cfg) == Estimate(180.0, 30.0, "entity")


def test_source_is_least_specific_layer_any_node_needed() -> None:
    store = InMemoryThroughputStore()
    store.set_entity_distributed("j1", "a1", 2, 50.0)
    store.set_type_distributed("j1", "A", 2, 60.0)
    est = estimator(store)
    # a1 known as entity (50), a2 only by type (60): pace 50, source "type"
    assert est.throughput(job(), two_nodes()) == Estimate(400.0, 50.0, "type")
    assert est.per_gpu_on_node(job(), "a1", two_nodes()) == (50.0, "entity")
    assert est.per_gpu_on_node(job(), "a2", two_nodes()) == (60.0, "type")


# --- type_per_gpu -------------------------------------------------------------------


def test_type_per_gpu_lookup_order() -> None:
    store = InMemoryThroughputStore()
    store.set_profile("j1", "A", profile(1, t_d=0.3))
    # theory on 1 GPU: T_c = 0, max(0.3, 0.25) + 0.1 + 0.01 = 0.41 -> 32/0.41
    assert estimator(store).type_per_gpu(job(), "A") == pytest.approx(32 / 0.41)
    store.set_type_aggregated("j1", "A", 1, 64.0)
    assert estimator(store).type_per_gpu(job(), "A") == 64.0
    # unknown everywhere: table 100 x speed 2
    assert estimator(store).type_per_gpu(job(), "B") == 200.0


def test_type_per_gpu_ignores_entity_and_multi_gpu_entries() -> None:
    store = InMemoryThroughputStore()
    store.set_entity_aggregated("j1", "a1", 1, 1.0)
    store.set_type_aggregated("j1", "A", 2, 1.0)
    assert estimator(store).type_per_gpu(job(), "A") == 100.0


def test_type_per_gpu_unknown_type() -> None:
    with pytest.raises(UnknownGpuTypeError, match="'Z'"):
        estimator(InMemoryThroughputStore()).type_per_gpu(job(), "Z")


# --- bad configurations -------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "error", "text"),
    [
        (Configuration.of("Z", {"a1": 1}), UnknownGpuTypeError, "unknown GPU type"),
        (Configuration.of("A", {"zz": 1}), InvalidInputError, "unknown node"),
        (Configuration.of("A", {"b1": 1}), InvalidInputError, "carries 'B'"),
        (Configuration.of("A", {"a1": 9}), InvalidInputError, "has 8 GPUs"),
    ],
)
def test_bad_configuration_raises(config: Configuration, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        estimator(InMemoryThroughputStore()).throughput(job(), config)


def test_per_gpu_on_node_outside_configuration() -> None:
    with pytest.raises(InvalidInputError, match="not part of"):
        estimator(InMemoryThroughputStore()).per_gpu_on_node(job(), "a3", two_nodes())


# --- memoisation -------------------------------------------------------------------


class CountingStore(InMemoryThroughputStore):
    """Counts reads so tests can see the memo at work."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def entity_aggregated(self, job_id: str, node_id: str, gpus: int) -> float | None:
        self.reads += 1
        return super().entity_aggregated(job_id, node_id, gpus)

    def type_aggregated(self, job_id: str, gpu_type: str, gpus: int) -> float | None:
        self.reads += 1
        return super().type_aggregated(job_id, gpu_type, gpus)


def test_throughput_is_memoised_per_job_and_config() -> None:
    store = CountingStore()
    store.set_entity_aggregated("j1", "a1", 4, 50.0)
    store.set_entity_aggregated("j2", "a1", 4, 20.0)
    est = estimator(store)
    first = est.throughput(job("j1"), one_node())
    reads = store.reads
    assert est.throughput(job("j1"), one_node()) is first
    assert store.reads == reads
    # another job or another configuration is a fresh question
    assert est.throughput(job("j2"), one_node()).per_gpu == 20.0
    assert est.throughput(job("j1"), one_node(2)).source == "table"
    assert store.reads > reads


def test_type_per_gpu_is_memoised() -> None:
    store = CountingStore()
    est = estimator(store)
    est.type_per_gpu(job(), "A")
    reads = store.reads
    est.type_per_gpu(job(), "A")
    assert store.reads == reads


def test_type_fractions_read_only() -> None:
    fractions = estimator(InMemoryThroughputStore()).type_fractions
    assert dict(fractions) == {"A": 0.75, "B": 0.25}
    with pytest.raises(TypeError):
        fractions["A"] = 1.0  # type: ignore[index]


# --- properties --------------------------------------------------------------------

times = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)
bandwidths = st.floats(min_value=1e6, max_value=1e11, allow_nan=False)


@st.composite
def profiles(draw: st.DrawFn) -> PhaseProfile:
    data = Mixture(draw(st.floats(0.0, 1.0)), draw(times), 0.0, draw(times), 0.0)
    wait = Mixture(draw(st.floats(0.0, 1.0)), draw(times), 0.0, draw(times), 0.0)
    return PhaseProfile(
        draw(times), draw(times), draw(times), draw(st.sampled_from([1, 2])), data, wait
    )


@given(
    p=profiles(),
    params=st.floats(1e5, 1e10),
    b1=bandwidths,
    b2=bandwidths,
    gpus=st.integers(1, 8),
    n_nodes=st.integers(1, 3),
)
def test_iteration_time_never_grows_with_bandwidth(
    p: PhaseProfile, params: float, b1: float, b2: float, gpus: int, n_nodes: int
) -> None:
    low, high = sorted((b1, b2))
    parts = {f"a{i + 1}": gpus for i in range(n_nodes)}
    cfg = Configuration.of("A", parts)
    slow = iteration_time(p, params, cfg, low, low)
    fast = iteration_time(p, params, cfg, high, high)
    assert fast <= slow * (1 + 1e-12)


@given(p=profiles())
def test_pattern_1_never_slower_than_pattern_2(p: PhaseProfile) -> None:
    one = PhaseProfile(p.t_f, p.t_b, p.t_u, 1, p.data, p.sync_wait)
    two = PhaseProfile(p.t_f, p.t_b, p.t_u, 2, p.data, p.sync_wait)
    cfg = one_node()
    assert iteration_time(one, PARAMS, cfg, B_LINK, B_NET) <= iteration_time(
        two, PARAMS, cfg, B_LINK, B_NET
    ) * (1 + 1e-12)


@given(
    values=st.lists(st.one_of(st.none(), st.floats(0.1, 1e4)), min_size=3, max_size=3),
    gpus=st.lists(st.integers(1, 8), min_size=3, max_size=3),
)
def test_slowest_node_never_exceeds_any_node(values: list[float | None], gpus: list[int]) -> None:
    store = InMemoryThroughputStore()
    for node_id, value in zip(("a1", "a2", "a3"), values, strict=True):
        if value is not None:
            store.set_entity_distributed("j1", node_id, 3, value)
    cfg = Configuration.of("A", dict(zip(("a1", "a2", "a3"), gpus, strict=True)))
    est = estimator(store)
    result = est.throughput(job(), cfg)
    per_node = [est.per_gpu_on_node(job(), n, cfg)[0] for n in cfg.node_ids]
    assert result.per_gpu == min(per_node)
    assert result.samples_per_s == pytest.approx(min(per_node) * sum(gpus))


def test_seconds_per_sample_is_eq_9_sum_and_memoised() -> None:
    store = CountingStore()
    store.set_type_aggregated("j1", "A", 1, 10.0)
    store.set_type_aggregated("j1", "B", 1, 40.0)
    est = estimator(store)
    # P(A) = 24/32 = 0.75, P(B) = 0.25: 0.75 / 10 + 0.25 / 40 = 0.08125 s per sample
    assert est.seconds_per_sample(job()) == pytest.approx(0.08125)
    reads = store.reads
    est.seconds_per_sample(job())
    assert store.reads == reads


class ProfileCountingStore(InMemoryThroughputStore):
    """Counts how often the theory layer is read."""

    profile_reads: int = 0

    def profile(self, job_id: str, gpu_type: str) -> PhaseProfile | None:
        self.profile_reads += 1
        return super().profile(job_id, gpu_type)


def test_theory_is_worked_out_once_per_shape_and_shared_by_equal_shapes() -> None:
    store = ProfileCountingStore()
    store.set_profile("j", "A", profile())
    job = Job(id="j", demands=(2, 4), total_samples=1e6, batch_size=32, params=PARAMS)
    est = Estimator(cluster(), store, Settings())
    on_a1 = est.throughput(job, Configuration.of("A", {"a1": 4}))
    on_a3 = est.throughput(job, Configuration.of("A", {"a3": 4}))
    assert on_a1.source == on_a3.source == "theory"
    assert on_a1.samples_per_s == on_a3.samples_per_s
    split = est.throughput(job, Configuration.of("A", {"a1": 2, "a2": 2}))
    assert store.profile_reads == 2  # one 4-GPU single-node shape, one 2-node shape
    store2 = InMemoryThroughputStore()
    store2.set_profile("j", "A", profile())
    fresh = Estimator(cluster(), store2, Settings())
    assert split.samples_per_s == fresh.throughput(job, two_nodes(2)).samples_per_s
    assert on_a1.samples_per_s == fresh.throughput(job, one_node(4)).samples_per_s


@pytest.mark.parametrize(
    ("write", "read"),
    [
        ("set_entity_aggregated", "entity_aggregated"),
        ("set_entity_distributed", "entity_distributed"),
        ("set_type_aggregated", "type_aggregated"),
        ("set_type_distributed", "type_distributed"),
    ],
)
def test_each_layer_keeps_a_positive_throughput_and_refuses_others(write: str, read: str) -> None:
    store = InMemoryThroughputStore()
    getattr(store, write)("j", "k", 2, 7.5)
    assert getattr(store, read)("j", "k", 2) == 7.5
    for bad in (0.0, -1.0):
        with pytest.raises(InvalidInputError, match="must be > 0"):
            getattr(store, write)("j", "k", 2, bad)
    assert getattr(store, read)("j", "k", 2) == 7.5
