"""Rounds and the allocation history a plan leaves behind."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.model import Assignment, Configuration, Plan
from hopsd.ledger import by_job
from hopsd.ledger.allocations import (
    allocation_config,
    allocation_history,
    allocations_in_round,
    changes_from_plan,
    placements,
    record_allocation,
    record_allocations,
)
from hopsd.ledger.models import AllocationReason, JobRow
from hopsd.ledger.rounds import (
    RoundSummary,
    full_round_times,
    last_round,
    next_round_number,
    recent_rounds,
    record_round,
)

R = AllocationReason


def test_a_window_s_full_rounds_are_the_instants_hopsd_s_round_clock_fired(
    Sessions: sessionmaker[Session],
) -> None:
    fragment = '{"kind":"fragment","actions":[],"notes":[]}'
    full = '{"kind":"round","actions":[],"notes":[]}'
    with Sessions.begin() as s:
        record_round(s, RoundSummary(number=1, started_at=100.0, note=full))
        record_round(s, RoundSummary(number=2, started_at=205.0, note=fragment))
        record_round(s, RoundSummary(number=3, started_at=206.0, note=full, shadow=True))
        record_round(s, RoundSummary(number=4, started_at=207.0, note="not json"))
        record_round(s, RoundSummary(number=5, started_at=209.0, note=full))
        record_round(s, RoundSummary(number=6, started_at=218.5, note=full))
    with Sessions.begin() as s:
        # fragments, shadow rounds and unreadable notes say nothing of the clock
        assert full_round_times(s, 200.0, 300.0) == [209.0, 218.5]
        assert full_round_times(s, 0.0, 210.0) == [100.0, 209.0]
        assert full_round_times(s, 220.0, 300.0) == []


def test_round_numbering_survives_and_ignores_shadow_rounds(
    Sessions: sessionmaker[Session],
) -> None:
    with Sessions.begin() as s:
        assert next_round_number(s) == 1
        record_round(s, RoundSummary(number=1, started_at=0.0))
        record_round(s, RoundSummary(number=2, started_at=300.0, objective=4.5, window_size=3))
        record_round(s, RoundSummary(number=9, started_at=310.0, shadow=True))
    with Sessions() as s:
        assert next_round_number(s) == 3
        assert next_round_number(s, shadow=True) == 10
        latest = last_round(s)
        assert latest is not None and latest.number == 2 and latest.objective == 4.5
        assert [r.number for r in recent_rounds(s, limit=5)] == [2, 1]


def test_plan_allocations_are_recorded_with_reasons(
    Sessions: sessionmaker[Session], add_jobs: Callable[..., list[JobRow]]
) -> None:
    a100 = Configuration.of("a100", {"n1": 2})
    moved = Configuration.of("v100", {"n3": 4, "n4": 4})
    plan = Plan(
        start=(Assignment("s", a100),),
        keep=(Assignment("k", Configuration.of("a100", {"n2": 1})),),
        move=(Assignment("m", moved),),
        preempt=("p",),
    )
    with Sessions.begin() as s:
        add_jobs(s, "s", "k", "m", "p", now=0.0)
        round_id = record_round(s, RoundSummary(number=1, started_at=10.0)).id
        assert record_allocations(s, round_id, changes_from_plan(plan), now=10.0) == 4
        record_allocation(s, None, "s", R.END, None, now=99.0)
    with Sessions() as s:
        rows = allocations_in_round(s, round_id)
        assert [(r.job_id, r.reason) for r in rows] == [
            ("s", R.START), ("k", R.KEEP), ("m", R.MOVE), ("p", R.PREEMPT),
        ]  # fmt: skip
        assert allocation_config(rows[2]) == moved and rows[2].total_gpus == 8
        assert allocation_config(rows[3]) is None and rows[3].total_gpus == 0
        history = allocation_history(s, "s")
        assert [(h.reason, h.at) for h in history] == [(R.START, 10.0), (R.END, 99.0)]
        assert allocation_config(history[0]) == a100


def test_placements_of_many_jobs_are_read_chunk_by_chunk_and_kept_per_job(
    Sessions: sessionmaker[Session],
    add_jobs: Callable[..., list[JobRow]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(by_job, "CHUNK", 2)  # five jobs: three queries
    config = Configuration.of("a100", {"n1": 1})
    with Sessions.begin() as s:
        add_jobs(s, *(f"j{k}" for k in range(5)), now=0.0)
        for k in (0, 2, 4):
            record_allocation(s, None, f"j{k}", R.START, config, now=10.0 + k)
            record_allocation(s, None, f"j{k}", R.KEEP, config, now=20.0 + k)
        record_allocation(s, None, "j4", R.END, None, now=30.0)
    with Sessions() as s:
        found = placements(s, ["j4", "j0", "j1", "j2", "j3", "j0"])
    assert list(found) == ["j4", "j0", "j1", "j2", "j3"]
    assert [(p.reason, p.at) for p in found["j4"]] == [(R.START, 14.0), (R.END, 30.0)]
    assert [p.at for p in found["j0"]] == [10.0] and [p.at for p in found["j2"]] == [12.0]
    assert found["j1"] == [] and found["j3"] == []
