"""Intent log: written before acting, resumable after a crash, idempotent."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.errors import IntentStateError
from hopsd.ledger.intents import (
    IntentRequest,
    intent_key,
    intent_record,
    mark_abandoned,
    mark_done,
    mark_failed,
    pending_intents,
    record_intent,
    record_intent_records,
    record_intents,
)
from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.models import IntentAction, IntentRow, IntentState
from hopsd.ledger.rounds import RoundSummary, record_round

A = IntentAction


def _setup(Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]) -> int:
    with Sessions.begin() as s:
        for job_id in ("j1", "j2", "j3"):
            add_job(s, make_spec(job_id), now=1.0)
        return record_round(s, RoundSummary(number=1, started_at=2.0)).id


def test_crash_between_write_and_enactment_resumes_idempotently(
    engine: Engine, Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    round_id = _setup(Sessions, make_spec)
    payload = {"partition": "rtx3090", "nodelist": "n[1-2]", "gres": "gpu:2"}
    enacted: list[str] = []

    # Daemon 1: intents are committed before acting; it acts on j1 then dies.
    with Sessions.begin() as s:
        first = record_intent(s, "j1", A.UPDATE, payload, round_id, now=3.0)
        second = record_intent(s, "j2", A.RELEASE, {}, round_id, now=3.0)
        ids = (first.id, second.id)
    enacted.append("j1")  # Slurm changed, then the process is killed before mark_done
    crashed = Sessions()
    crashed.execute(select(IntentRow)).all()
    crashed.close()  # dropped without marking anything
    engine.dispose()

    # Daemon 2 (a new engine, as after a restart) sees both intents pending.
    fresh = make_engine(engine.url.render_as_string(hide_password=False))
    Fresh = make_sessionmaker(fresh)
    try:
        with Fresh.begin() as s:
            pending = pending_intents(s)
            assert [p.id for p in pending] == list(ids)
            assert pending[0].payload == payload and pending[0].state is IntentState.PENDING
            # Re-recording the same decision does not duplicate it.
            again = record_intent(s, "j1", A.UPDATE, payload, round_id, now=9.0)
            assert again.id == ids[0] and again.created_at == 3.0
            for intent in pending:
                if intent.job_id not in enacted:  # finish what was not done
                    enacted.append(str(intent.job_id))
                mark_done(s, intent, now=10.0)
        with Fresh.begin() as s:
            assert pending_intents(s) == []
            # Resuming twice (another crash after the marks) changes nothing.
            for intent_id in ids:
                assert mark_done(s, intent_id, now=11.0).finished_at == 10.0
            count = s.scalar(select(func.count()).select_from(IntentRow))
        assert count == 2
        assert enacted == ["j1", "j2"]
    finally:
        fresh.dispose()


def test_uncommitted_intent_is_not_visible_after_a_crash(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    round_id = _setup(Sessions, make_spec)
    doomed = Sessions()
    doomed.begin()
    record_intent(doomed, "j1", A.CANCEL, {}, round_id, now=3.0)
    doomed.close()  # never committed: the action was never taken either
    with Sessions() as s:
        assert pending_intents(s) == []


def test_failed_and_abandoned_are_final(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    round_id = _setup(Sessions, make_spec)
    with Sessions.begin() as s:
        failing = record_intent(s, "j1", A.REQUEUE_HOLD, {}, round_id, now=3.0)
        dropped = record_intent(s, "j2", A.MAKE_ELIGIBLE, {}, round_id, now=3.0)
        mark_failed(s, failing, "scontrol requeuehold 12: Invalid job id specified", now=4.0)
        mark_abandoned(s, dropped, "job already ended in Slurm", now=4.0)
    with Sessions.begin() as s:
        rows = list(
            s.scalars(
                select(IntentRow).where(IntentRow.round_id == round_id).order_by(IntentRow.id)
            )
        )
        assert [r.state for r in rows] == [IntentState.FAILED, IntentState.ABANDONED]
        assert "Invalid job id" in rows[0].error
        with pytest.raises(IntentStateError, match="already failed"):
            mark_done(s, rows[0].id)
        with pytest.raises(IntentStateError):
            mark_failed(s, rows[1], "late")


def _three_requests() -> list[IntentRequest]:
    """An update, a release and a hold with a key of its own, of jobs j1 to j3."""
    return [
        IntentRequest("j1", A.UPDATE, {"nodes": "n1"}),
        IntentRequest("j2", A.RELEASE),
        IntentRequest("j3", A.HOLD, key="custom-key-1"),
    ]


def test_record_intents_batches_and_reuses_existing_keys(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    round_id = _setup(Sessions, make_spec)
    requests = _three_requests()
    with Sessions.begin() as s:
        first = record_intents(s, requests, round_id, now=3.0)
    with Sessions.begin() as s:
        second = record_intents(s, [*requests, IntentRequest("j3", A.CANCEL)], round_id, now=4.0)
        assert [i.id for i in second[:3]] == [i.id for i in first]
        assert second[2].idempotency_key == "custom-key-1"
        assert len(pending_intents(s)) == 4
        assert [i.job_id for i in pending_intents(s, job_id="j3")] == ["j3", "j3"]


def test_intent_key_is_deterministic_and_payload_sensitive() -> None:
    a = intent_key("j1", A.UPDATE, {"x": 1, "y": [1, 2]}, 5)
    assert a == intent_key("j1", "update", {"y": [1, 2], "x": 1}, 5)  # key order irrelevant
    assert a != intent_key("j1", A.UPDATE, {"x": 2, "y": [1, 2]}, 5)
    assert a != intent_key("j1", A.UPDATE, {"x": 1, "y": [1, 2]}, 6)
    assert a.startswith("r5:j1:update:")


def test_intent_records_written_at_once_read_as_the_rows_and_reuse_existing_keys(
    Sessions: sessionmaker[Session], make_spec: Callable[..., JobSpec]
) -> None:
    round_id, requests = _setup(Sessions, make_spec), _three_requests()
    with Sessions.begin() as s:
        earlier = record_intent(s, "j2", A.CANCEL, {}, round_id, now=2.5)  # flushed, not committed
        first = record_intent_records(s, [*requests, requests[0]], round_id, now=3.0)
        assert first[0] == first[3]  # the same request twice: one intent
        assert [(r.job_id, r.action, r.state, r.created_at) for r in first[:3]] == [
            ("j1", A.UPDATE, IntentState.PENDING, 3.0),
            ("j2", A.RELEASE, IntentState.PENDING, 3.0),
            ("j3", A.HOLD, IntentState.PENDING, 3.0),
        ]
        assert first[0].payload == {"nodes": "n1"} and first[0].round_id == round_id
        again = record_intent_records(s, [IntentRequest("j2", A.CANCEL)], round_id, now=4.0)
        assert [r.id for r in again] == [earlier.id]
    with Sessions.begin() as s:
        rows = {r.id: intent_record(r) for r in pending_intents(s)}
        assert [rows[r.id] for r in first[:3]] == first[:3]
        mark_done(s, first[1].id, now=5.0)
    with Sessions.begin() as s:
        second = record_intent_records(s, [*requests, IntentRequest("j3", A.CANCEL)], round_id, 6.0)
        assert [r.id for r in second[:3]] == [r.id for r in first[:3]]
        assert second[1].state == IntentState.DONE and second[3].created_at == 6.0
        assert len(pending_intents(s)) == 4
