"""The SQL three-layer store answers exactly like the in-memory one on the same data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.errors import InvalidInputError
from hopsd.core.throughput import (
    InMemoryThroughputStore,
    Mixture,
    PhaseProfile,
    ThroughputStore,
)
from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.models import ProfileRow, ThroughputLayer, ThroughputRow
from hopsd.ledger.throughput_store import SqlThroughputStore, load_throughput_store

JOBS = ("j1", "j2", "j3")
NODES = ("n1", "n2")
TYPES = ("v100", "a100")
LAYERS = ("entity_aggregated", "entity_distributed", "type_aggregated", "type_distributed")

thr = st.floats(min_value=0.01, max_value=5000.0, allow_nan=False, allow_infinity=False)
times = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
mixtures = st.builds(Mixture, st.floats(0.0, 1.0), times, times, times, times)
profiles = st.builds(PhaseProfile, times, times, times, st.sampled_from((1, 2)), mixtures, mixtures)

set_op = st.tuples(
    st.just("set"), st.sampled_from(LAYERS), st.sampled_from(JOBS),
    st.sampled_from(NODES + TYPES), st.integers(1, 4), thr,
)  # fmt: skip
profile_op = st.tuples(st.just("profile"), st.sampled_from(JOBS), st.sampled_from(TYPES), profiles)
forget_op = st.tuples(st.just("forget"), st.sampled_from(JOBS))
operations = st.lists(st.one_of(set_op, set_op, profile_op, forget_op), max_size=25)


def _apply(store: InMemoryThroughputStore | SqlThroughputStore, op: tuple[Any, ...]) -> None:
    if op[0] == "set":
        _, layer, job, place, size, value = op
        getattr(store, f"set_{layer}")(job, place, size, value)
    elif op[0] == "profile":
        store.set_profile(op[1], op[2], op[3])
    else:
        store.forget_job(op[1])


def _all_lookups(store: ThroughputStore) -> list[object]:
    out: list[object] = []
    for job in JOBS:
        for size in range(1, 5):
            for place in NODES + TYPES:
                out += [
                    store.entity_aggregated(job, place, size),
                    store.entity_distributed(job, place, size),
                    store.type_aggregated(job, place, size),
                    store.type_distributed(job, place, size),
                ]
        out += [store.profile(job, t) for t in TYPES]
    return out


@pytest.fixture
def with_jobs(Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]) -> None:
    with Sessions.begin() as s:
        for job_id in JOBS:
            add_job(s, make_spec(job_id), now=0.0)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=operations)
def test_sql_store_matches_in_memory_store(
    Sessions: sessionmaker[Session],
    with_jobs: None,
    ops: list[tuple[Any, ...]],
) -> None:
    memory = InMemoryThroughputStore()
    try:
        with Sessions.begin() as s:
            sql = SqlThroughputStore(s, now=1.0)
            for op in ops:
                _apply(memory, op)
                _apply(sql, op)
        expected = _all_lookups(memory)
        with Sessions() as s:
            assert _all_lookups(SqlThroughputStore(s)) == expected
            assert _all_lookups(load_throughput_store(s, JOBS)) == expected
            assert _all_lookups(load_throughput_store(s)) == expected
    finally:
        with Sessions.begin() as s:
            s.execute(delete(ThroughputRow))
            s.execute(delete(ProfileRow))


def test_sql_store_satisfies_the_core_protocol(Sessions: sessionmaker[Session]) -> None:
    with Sessions() as s:
        assert isinstance(SqlThroughputStore(s), ThroughputStore)


def test_load_restricts_to_requested_jobs(Sessions: sessionmaker[Session], with_jobs: None) -> None:
    with Sessions.begin() as s:
        sql = SqlThroughputStore(s)
        sql.set_type_aggregated("j1", "v100", 1, 10.0)
        sql.set_type_aggregated("j2", "v100", 1, 20.0)
    with Sessions() as s:
        loaded = load_throughput_store(s, ["j2"], chunk=1)
        assert loaded.type_aggregated("j1", "v100", 1) is None
        assert loaded.type_aggregated("j2", "v100", 1) == 20.0


def test_observe_learns_by_ewma(Sessions: sessionmaker[Session], with_jobs: None) -> None:
    layer = ThroughputLayer.ENTITY_AGGREGATED
    with Sessions.begin() as s:
        sql = SqlThroughputStore(s, now=5.0)
        assert sql.observe(layer, "j1", "n1", 2, 100.0, samples=640.0) == 100.0
    with Sessions.begin() as s:
        sql = SqlThroughputStore(s, now=6.0)
        # 0.7 * 100 + 0.3 * 200 = 130; then 0.7 * 130 + 0.3 * 100 = 121
        assert sql.observe(layer, "j1", "n1", 2, 200.0, samples=640.0) == pytest.approx(130.0)
        assert sql.observe(layer, "j1", "n1", 2, 100.0, samples=320.0) == pytest.approx(121.0)
        assert sql.observe(layer, "j1", "n1", 2, 50.0, alpha=1.0) == 50.0
    with Sessions() as s:
        row = s.get(ThroughputRow, ("j1", layer, "n1", 2))
        assert row is not None
        assert row.observations == 4 and row.samples == 1600.0 and row.updated_at == 6.0
        assert SqlThroughputStore(s).entity_aggregated("j1", "n1", 2) == 50.0


def test_writers_reject_nonsense(Sessions: sessionmaker[Session], with_jobs: None) -> None:
    with Sessions() as s:
        sql = SqlThroughputStore(s)
        with pytest.raises(InvalidInputError):
            sql.set_type_aggregated("j1", "v100", 1, 0.0)
        with pytest.raises(InvalidInputError):
            sql.observe(ThroughputLayer.TYPE_AGGREGATED, "j1", "v100", 1, 10.0, alpha=0.0)
        with pytest.raises(InvalidInputError):
            sql.set_type_distributed("j1", "v100", 0, 10.0)
