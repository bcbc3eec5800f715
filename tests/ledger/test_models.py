"""Every model survives a write, a commit and a read in a fresh session unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.models import (
    AllocationReason,
    AllocationRow,
    Base,
    IntentAction,
    IntentRow,
    IntentState,
    JobRow,
    JobState,
    LeaseRow,
    LrRule,
    ProfileRow,
    RoundRow,
    TagStatus,
    ThroughputLayer,
    ThroughputRow,
    UsageRow,
)


def _columns(row: Base) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in sa_inspect(type(row)).column_attrs}


def _job() -> JobRow:
    return JobRow(
        id="4242",
        slurm_job_id=4242,
        user="bob",
        account="nlp",
        script_path="/home/bob/bert.sh",
        demands=[2, 4, 8],
        total_samples=2.5e7,
        batch_size=16,
        model_name="distilbert",
        params=6.6e7,
        lr=3e-5,
        lr_rule=LrRule.SQRT,
        lr_by_demand={"2": 3e-5, "4": 4.2e-5},
        state=JobState.RUNNING,
        state_reason="started by round 7",
        state_changed_at=1_700_000_123.25,
        submit_time=1_700_000_000.5,
        first_start_time=1_700_000_100.0,
        end_time=None,
        wait_time=99.5,
        service_gpu_s=1234.5,
        service_norm=987.25,
        restarts=2,
        samples_done=12345.0,
        estimate_source="entity",
        tag_status=TagStatus.INVALID,
        tag_reason="demand set not increasing",
        current_gpu_type="rtx3090",
        current_parts=[["n1", 2], ["n2", 2]],
        latency_ratio=0.125,
        input_problem="progress file ignored: nested deeper than 2 levels",
        plan_reason="waiting: GPUs that fit go to jobs of higher priority",
        size_doubt="size claim not believed: reported 70 samples done, more than the 64 claimed",
        adopted_tag='hops1:{"d":[2,4],"n":1000,"xt":["k80"]}',
        name="train.sh",
        updated_at=1_700_000_200.0,
    )


def _others() -> list[Base]:
    return [
        RoundRow(
            id=7, number=7, started_at=10.5, queued=3, running=4, window_size=5,
            objective=12.75, decision_s=0.031, idle_gpus_waiting=1, plans=2,
            policy="hops", shadow=True, note="fragment plan added",
        ),
        AllocationRow(
            id=1, round_id=7, job_id="4242", reason=AllocationReason.MOVE, gpu_type="rtx3090",
            parts=[["n1", 2], ["n2", 2]], total_gpus=4, at=11.0,
        ),
        IntentRow(
            id=1, idempotency_key="r7:4242:update:abc", round_id=7, job_id="4242",
            action=IntentAction.REQUEUE_HOLD, payload={"nodes": ["n1", "n2"], "gres": "gpu:2"},
            state=IntentState.FAILED, error="scontrol: error: Invalid job id", created_at=11.5,
            finished_at=12.0,
        ),
        ThroughputRow(
            job_id="4242", layer=ThroughputLayer.ENTITY_DISTRIBUTED, place="n1", size=2,
            per_gpu=41.5, observations=3, samples=9000.0, updated_at=13.0,
        ),
        ProfileRow(
            job_id="4242", gpu_type="rtx3090", t_f=0.01, t_b=0.02, t_u=0.003, pattern=2,
            data_p_hit=0.8, data_mu_hit=0.004, data_sigma_hit=0.001, data_mu_miss=0.05,
            data_sigma_miss=0.01, wait_p_hit=0.7, wait_mu_hit=0.002, wait_sigma_hit=0.0005,
            wait_mu_miss=0.02, wait_sigma_miss=0.004, iterations=40, updated_at=14.0,
        ),
        UsageRow(
            id=1, user="bob", account="nlp", interval_start=0.0, interval_end=3600.0,
            gpu_s=7200.0, gpu_s_norm=5400.0,
        ),
        LeaseRow(
            name="hopsd", holder="host-a:123", acquired_at=1.0, heartbeat_at=2.0, expires_at=32.0,
            token=5,
        ),
    ]  # fmt: skip


def test_every_model_round_trips(Sessions: sessionmaker[Session]) -> None:
    originals = [_job(), *_others()]
    expected = [(type(r), _columns(r)) for r in originals]
    with Sessions.begin() as s:
        for row in originals:  # flushed one by one: parents before the rows that refer to them
            s.add(row)
            s.flush()
    with Sessions() as s:
        for cls, values in expected:
            pk = sa_inspect(cls).primary_key
            key = tuple(values[str(c.key)] for c in pk)
            loaded = s.get(cls, key if len(key) > 1 else key[0])
            assert loaded is not None, cls.__name__
            assert _columns(loaded) == values, cls.__name__
    with Sessions() as s:
        job = s.get(JobRow, "4242")
        assert job is not None
        assert isinstance(job.state, JobState) and job.state is JobState.RUNNING
        assert isinstance(job.lr_rule, LrRule)


def test_check_constraint_rejects_unknown_state(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    with Sessions.begin() as s:
        add_job(s, make_spec("a"), now=1.0)
    with pytest.raises(IntegrityError), Sessions.begin() as s:
        s.execute(text("UPDATE jobs SET state = 'zombie' WHERE id = 'a'"))
    with Sessions() as s:
        assert s.scalar(select(JobRow.state)) is JobState.SUBMITTED


def test_deleting_a_job_cascades_to_its_measurements(
    Sessions: sessionmaker[Session], add_jobs: Callable[..., list[JobRow]]
) -> None:
    with Sessions.begin() as s:
        add_jobs(s, "a", "b")
        for job_id in ("a", "b"):
            s.add(ThroughputRow(
                job_id=job_id, layer=ThroughputLayer.TYPE_AGGREGATED, place="v100", size=1,
                per_gpu=10.0, observations=1, samples=0.0, updated_at=1.0,
            ))  # fmt: skip
    with Sessions.begin() as s:
        s.execute(text("DELETE FROM jobs WHERE id = 'a'"))
    with Sessions() as s:
        assert s.scalars(select(ThroughputRow.job_id)).all() == ["b"]


def test_foreign_key_is_enforced(Sessions: sessionmaker[Session]) -> None:
    with pytest.raises(IntegrityError), Sessions.begin() as s:
        s.add(ThroughputRow(
            job_id="ghost", layer=ThroughputLayer.TYPE_AGGREGATED, place="v100", size=1,
            per_gpu=10.0, observations=1, samples=0.0, updated_at=1.0,
        ))  # fmt: skip
