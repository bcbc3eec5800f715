"""Age (eq. 9), latency ratio, finish-time fairness and the priority registry."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopsd.core import priorities
from hopsd.core.errors import InvalidInputError
from hopsd.core.estimator import Estimator
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.priorities import (
    NamedPriority,
    PriorityContext,
    age,
    expected_rate,
    finish_time_fairness,
    get_priority,
    latency_ratio,
    order_jobs,
    priority_names,
    register_priority,
)
from hopsd.core.settings import Settings
from hopsd.core.throughput import InMemoryThroughputStore

# Cluster of 16 GPUs: type A holds 4 (P = 0.25), type B 12 (P = 0.75).
# Type C has no node (P = 0) and must not matter.
CLUSTER = Cluster.build(
    [GpuType("A"), GpuType("B", speed=3.0), GpuType("C")],
    [Node("a1", "A", 4), Node("b1", "B", 6), Node("b2", "B", 6)],
)

# The reference job: 36000 samples, demands {1, 3} (R_avg = 2), measured at
# 10 samples/s on one A GPU and 30 on one B GPU, so
#   age = 0.25 * 36000 / (10 * 2) + 0.75 * 36000 / (30 * 2) = 450 + 450 = 900 s
TOTAL = 36000.0


def make_job(job_id: str = "j1", **changes: object) -> Job:
    base = Job(job_id, (1, 3), total_samples=TOTAL)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def make_store(*job_ids: str) -> InMemoryThroughputStore:
    store = InMemoryThroughputStore()
    for job_id in job_ids or ("j1",):
        store.set_type_aggregated(job_id, "A", 1, 10.0)
        store.set_type_aggregated(job_id, "B", 1, 30.0)
        store.set_type_aggregated(job_id, "B", 2, 25.0)
    return store


def ctx(
    store: InMemoryThroughputStore | None = None, now: float = 300.0, n_jobs: int = 4
) -> PriorityContext:
    est = Estimator(CLUSTER, store or make_store(), Settings())
    return PriorityContext(now=now, cluster=CLUSTER, estimator=est, n_jobs=n_jobs)


def test_age_is_eq_9() -> None:
    assert age(make_job(), ctx()) == pytest.approx(900.0)


def test_age_falls_back_to_table_for_unknown_job() -> None:
    # table: 100 x speed (A 1, B 3) => 0.25 * 36000 / (100 * 2) + 0.75 * 36000 / (300 * 2)
    #      = 45 + 45 = 90 s
    assert age(make_job("new"), ctx()) == pytest.approx(90.0)


def test_age_of_cluster_without_gpus_is_refused() -> None:
    empty = Cluster.build([GpuType("A")], [Node("a1", "A", 0)])
    est = Estimator(empty, make_store(), Settings())
    with pytest.raises(InvalidInputError, match="no GPUs"):
        age(make_job(), PriorityContext(0.0, empty, est))


def test_latency_ratio_is_wait_over_age() -> None:
    # 90 / 900 = 0.1
    assert latency_ratio(make_job(wait_time=90.0), ctx()) == pytest.approx(0.1)


def test_expected_rate_queued_and_running() -> None:
    # queued: 36000 / 900 = 40 samples/s; running on 2 B GPUs at 25 each: 50
    assert expected_rate(make_job(), ctx()) == pytest.approx(40.0)
    running = make_job(current=Configuration.of("B", {"b1": 2}))
    assert expected_rate(running, ctx()) == pytest.approx(50.0)


def test_ftf_queued_job() -> None:
    # n_jobs 4: share = min(R_max 3, 16 / 4) = 3 GPUs
    # T_ind = age * R_avg / share = 900 * 2 / 3 = 600 s; rate 36000 / 600 = 60/s
    # T_shared = (now 300 - submit 0) + 36000 / 60 = 900  => rho = 1.5
    assert finish_time_fairness(make_job(), ctx(n_jobs=4)) == pytest.approx(1.5)


def test_ftf_share_shrinks_with_more_jobs() -> None:
    # n_jobs 8: share = min(3, 2) = 2; T_ind = 900; rho = (300 + 900) / 900 = 4/3
    assert finish_time_fairness(make_job(), ctx(n_jobs=8)) == pytest.approx(4 / 3)


def test_ftf_running_job_uses_its_configuration() -> None:
    # running on {b1: 2} at 50 samples/s, 12000 done: remaining 24000 / 50 = 480 s
    # T_shared = 300 + 480 = 780; T_ind = 600 => rho = 1.3
    job = make_job(samples_done=12000.0, current=Configuration.of("B", {"b1": 2}))
    assert finish_time_fairness(job, ctx(n_jobs=4)) == pytest.approx(1.3)


def test_ftf_grows_with_waiting_and_ignores_future_submissions() -> None:
    job = make_job(submit_time=100.0)
    early = finish_time_fairness(job, ctx(now=100.0))
    late = finish_time_fairness(job, ctx(now=700.0))
    assert early == pytest.approx(1.0)  # nothing waited yet: as good as its own share
    assert late > early
    assert finish_time_fairness(job, ctx(now=0.0)) == pytest.approx(1.0)


def test_ftf_serves_short_waiting_job_first() -> None:
    # same wait, the shorter job has waited a larger share of its fair run time
    short = make_job("s", total_samples=3600.0)
    long = make_job("l", total_samples=360000.0)
    c = ctx(make_store("s", "l"))
    assert order_jobs([long, short], get_priority("ftf"), c) == (short, long)


def test_lr_orders_by_latency_ratio() -> None:
    # same age 900 s: LR 0.5, 0.1, 0.9
    jobs = [
        make_job("a", wait_time=450.0),
        make_job("b", wait_time=90.0),
        make_job("c", wait_time=810.0),
    ]
    ordered = order_jobs(jobs, get_priority("lr"), ctx(make_store("a", "b", "c")))
    assert [j.id for j in ordered] == ["c", "a", "b"]


def test_lr_favours_short_job_that_waited_as_long() -> None:
    short = make_job("s", total_samples=3600.0, wait_time=60.0)  # age 90 s, LR 0.667
    long = make_job("l", wait_time=300.0)  # age 900 s, LR 0.333
    ordered = order_jobs([long, short], get_priority("lr"), ctx(make_store("s", "l")))
    assert ordered == (short, long)


def test_las_is_negative_attained_service() -> None:
    las = get_priority("las")
    fresh = make_job("f", attained_service=0.0)
    served = make_job("s", attained_service=1200.0)
    assert las(served, ctx()) == -1200.0
    assert order_jobs([served, fresh], las, ctx()) == (fresh, served)


def test_sjf_is_negative_age() -> None:
    sjf = get_priority("sjf")
    short = make_job("s", total_samples=3600.0)
    c = ctx(make_store("s", "j1"))
    assert sjf(make_job(), c) == pytest.approx(-900.0)
    assert sjf(short, c) == pytest.approx(-90.0)
    assert order_jobs([make_job(), short], sjf, c)[0] is short


def test_srtf_is_negative_remaining_time() -> None:
    srtf = get_priority("srtf")
    # queued, half done: 18000 left at 40/s = 450 s
    assert srtf(make_job(samples_done=18000.0), ctx()) == pytest.approx(-450.0)
    # running on 2 B GPUs at 50/s, 30000 left: 600 s
    running = make_job(samples_done=6000.0, current=Configuration.of("B", {"b1": 2}))
    assert srtf(running, ctx()) == pytest.approx(-600.0)


def test_ties_break_on_submission_then_id() -> None:
    las = get_priority("las")
    jobs = [make_job("b", submit_time=5.0), make_job("c", submit_time=1.0), make_job("a")]
    jobs.append(make_job("z", submit_time=1.0))
    assert [j.id for j in order_jobs(jobs, las, ctx())] == ["a", "c", "z", "b"]


# --- registry ----------------------------------------------------------------------


def test_known_priorities() -> None:
    assert priority_names() == ("ftf", "las", "lr", "sjf", "srtf")
    for name in priority_names():
        assert get_priority(name).name == name


def test_unknown_priority_names_the_known_ones() -> None:
    with pytest.raises(InvalidInputError, match=r"unknown priority 'fair'.*las.*lr"):
        get_priority("fair")


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test do not leak into the module-wide registry."""
    monkeypatch.setattr(priorities, "_REGISTRY", dict(priorities._REGISTRY))


@pytest.mark.usefixtures("scratch_registry")
def test_register_custom_priority() -> None:
    fifo = register_priority(NamedPriority("fifo", lambda job, c: -job.submit_time))
    assert get_priority("fifo") is fifo
    assert register_priority(fifo) is fifo  # the same object again is fine
    assert "fifo" in priority_names()


@pytest.mark.usefixtures("scratch_registry")
def test_register_clash_and_empty_name_refused() -> None:
    with pytest.raises(InvalidInputError, match="already registered as 'lr'"):
        register_priority(NamedPriority("lr", lambda job, c: 0.0))
    with pytest.raises(InvalidInputError, match="non-empty name"):
        register_priority(NamedPriority("", lambda job, c: 0.0))


# --- properties ---------------------------------------------------------------------


@given(
    waits=st.lists(st.integers(0, 100_000), min_size=1, max_size=20),
)
def test_lr_order_matches_wait_order_for_identical_jobs(waits: list[int]) -> None:
    ids = [f"j{i}" for i in range(len(waits))]
    jobs = [make_job(i, wait_time=float(w)) for i, w in zip(ids, waits, strict=True)]
    ordered = order_jobs(jobs, get_priority("lr"), ctx(make_store(*ids)))
    ordered_waits = [j.wait_time for j in ordered]
    assert ordered_waits == sorted(waits, reverse=True)


@given(
    slow=st.floats(0.5, 100.0),
    factor=st.floats(1.0, 10.0),
)
def test_faster_hardware_never_increases_age(slow: float, factor: float) -> None:
    slow_store = InMemoryThroughputStore()
    fast_store = InMemoryThroughputStore()
    for gpu_type in ("A", "B"):
        slow_store.set_type_aggregated("j1", gpu_type, 1, slow)
        fast_store.set_type_aggregated("j1", gpu_type, 1, slow * factor)
    assert age(make_job(), ctx(fast_store)) <= age(make_job(), ctx(slow_store)) * (1 + 1e-12)
