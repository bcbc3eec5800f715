"""Intent log: every Slurm action is written before it is taken.

Protocol the daemon follows for each action:

1. ``record_intent`` and **commit** (the intent is now durable, state ``pending``);
2. take the action in Slurm;
3. ``mark_done`` (or ``mark_failed`` with the error) and commit.

A daemon killed between 1 and 3 finds the intent in :func:`pending_intents` on
restart and finishes it (the Slurm actions hops uses are idempotent when
re-applied to the observed state) or abandons it with a reason. The idempotency
key makes step 1 itself safe to repeat: recording the same intent twice yields
the same row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Table, func, insert, select, update
from sqlalchemy.orm import Session

from hopsd.ledger.by_job import CHUNK
from hopsd.ledger.errors import IntentStateError
from hopsd.ledger.models import IntentAction, IntentRow, IntentState
from hopsd.ledger.records import IntentRecord, IntentRequest

__all__ = ["IntentRequest"]

Intent = IntentRow
#: The intents table itself, for statements that build no ORM row.
_INTENTS = cast(Table, IntentRow.__table__)


def intent_key(
    job_id: str | None, action: IntentAction | str, payload: Mapping[str, Any], round_id: int | None
) -> str:
    """A deterministic key for (round, job, action, payload).

    Equal decisions of the same round map to the same key, so re-recording after
    a crash cannot create a duplicate; the key is also short enough to pass to
    Slurm (e.g. in a job comment) to recognise an action that already happened.
    """
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    round_part = "-" if round_id is None else str(round_id)
    return f"r{round_part}:{job_id or '-'}:{IntentAction(action).value}:{digest}"


def record_intent(
    session: Session,
    job_id: str | None,
    action: IntentAction | str,
    payload: Mapping[str, Any],
    round_id: int | None,
    *,
    now: float = 0.0,
    key: str | None = None,
) -> Intent:
    """Write a pending intent (or return the existing one with the same key).

    The row is flushed so its id is known; the caller must commit before acting.
    """
    action = IntentAction(action)
    key = key or intent_key(job_id, action, payload, round_id)
    existing = intent_by_key(session, key)
    if existing is not None:
        return existing
    row = IntentRow(**_pending(key, IntentRequest(job_id, action, payload), round_id, now))
    session.add(row)
    session.flush()
    return row


def _pending(key: str, request: IntentRequest, round_id: int | None, now: float) -> dict[str, Any]:
    """The columns of a new intent: pending, with no error yet."""
    return {
        "idempotency_key": key,
        "round_id": round_id,
        "job_id": request.job_id,
        "action": IntentAction(request.action),
        "payload": dict(request.payload),
        "state": IntentState.PENDING,
        "error": "",
        "created_at": now,
    }


def record_intents(
    session: Session, requests: Sequence[IntentRequest], round_id: int | None, now: float
) -> list[Intent]:
    """Record a round's actions together: one key lookup and one batched INSERT.

    Returns the intents in request order; requests whose key already exists
    yield the existing row, exactly like :func:`record_intent`.
    """
    keys = [r.key or intent_key(r.job_id, r.action, r.payload, round_id) for r in requests]
    known = _intents_by_keys(session, keys)
    out: list[Intent] = []
    for request, key in zip(requests, keys, strict=True):
        row = known.get(key)
        if row is None:
            row = IntentRow(**_pending(key, request, round_id, now))
            session.add(row)
            known[key] = row
        out.append(row)
    session.flush()
    return out


def record_intent_records(
    session: Session, requests: Sequence[IntentRequest], round_id: int | None, now: float
) -> list[IntentRecord]:
    """:func:`record_intents` as records, written with one executemany ``INSERT``: no ORM
    row is built. Adoption records a hold for each of thousands of jobs at once.

    Changes the session has not written yet are written first, so a key recorded
    earlier in the unit is found like any other.
    """
    keys = [r.key or intent_key(r.job_id, r.action, r.payload, round_id) for r in requests]
    session.flush()
    found = _records_by_keys(session, keys)
    new: dict[str, dict[str, Any]] = {}
    for request, key in zip(requests, keys, strict=True):
        if key not in found and key not in new:
            new[key] = _pending(key, request, round_id, now)
    if new:
        session.execute(insert(_INTENTS), list(new.values()))
        found.update(_records_by_keys(session, list(new)))
    return [found[key] for key in keys]


def _records_by_keys(
    session: Session, keys: Sequence[str], chunk: int = 900
) -> dict[str, IntentRecord]:
    """The recorded intents of these keys, read as records (a few ``IN`` queries)."""
    c = _INTENTS.c
    columns = (c.idempotency_key, c.id, c.job_id, c.action, c.payload, c.state, c.created_at)
    found: dict[str, IntentRecord] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), chunk):
        stmt = select(*columns, c.round_id).where(
            c.idempotency_key.in_(unique[start : start + chunk])
        )
        for key, id_, job_id, action, payload, state, created_at, round_ in session.execute(stmt):
            found[key] = IntentRecord(
                id_, job_id, IntentAction(action), dict(payload), state, created_at, round_
            )
    return found


def _intents_by_keys(session: Session, keys: Sequence[str], chunk: int = 900) -> dict[str, Intent]:
    found: dict[str, Intent] = {}
    for start in range(0, len(keys), chunk):
        stmt = select(IntentRow).where(IntentRow.idempotency_key.in_(keys[start : start + chunk]))
        found.update({row.idempotency_key: row for row in session.scalars(stmt)})
    return found


def intent_by_key(session: Session, key: str) -> Intent | None:
    return session.scalars(select(IntentRow).where(IntentRow.idempotency_key == key)).first()


def note_notice_sent(session: Session, intent: Intent | int, at: float) -> Intent:
    """Record when a pending ``notice`` intent's signal went out (its grace starts then)."""
    row = _resolve(session, intent)
    row.payload = {**row.payload, "sent_at": at}  # a new dict: the JSON column sees the change
    return row


def mark_done(session: Session, intent: Intent | int, now: float = 0.0) -> Intent:
    """Pending -> done. Marking a done intent again is a no-op (resume is idempotent)."""
    return _finish(session, intent, IntentState.DONE, now, "")


def mark_done_many(session: Session, intent_ids: Sequence[int], now: float = 0.0) -> int:
    """Mark many pending intents done in one UPDATE; returns how many were pending.

    For a daemon that enacts a batch of actions and then records the outcome in
    one short transaction. Intents already finished are left untouched.
    """
    done = 0
    ids = list(dict.fromkeys(intent_ids))
    for start in range(0, len(ids), 900):
        stmt = (
            update(IntentRow)
            .where(IntentRow.id.in_(ids[start : start + 900]))
            .where(IntentRow.state == IntentState.PENDING)
            .values(state=IntentState.DONE, finished_at=now, error="")
            .execution_options(synchronize_session="fetch")
        )
        done += session.execute(stmt).rowcount  # type: ignore[attr-defined]
    return done


def mark_failed(session: Session, intent: Intent | int, error: str, now: float = 0.0) -> Intent:
    """Pending -> failed, keeping the error text (the command and its output)."""
    return _finish(session, intent, IntentState.FAILED, now, error)


def mark_abandoned(session: Session, intent: Intent | int, reason: str, now: float = 0.0) -> Intent:
    """Pending -> abandoned: on resume the action was judged obsolete and not taken."""
    return _finish(session, intent, IntentState.ABANDONED, now, reason)


def pending_intents(session: Session, job_id: str | None = None) -> list[Intent]:
    """Intents written but never marked, oldest first: what a restarted daemon resumes."""
    stmt = select(IntentRow).where(IntentRow.state == IntentState.PENDING)
    if job_id is not None:
        stmt = stmt.where(IntentRow.job_id == job_id)
    return list(session.scalars(stmt.order_by(IntentRow.id)))


def _finish(
    session: Session, intent: Intent | int, target: IntentState, now: float, error: str
) -> Intent:
    row = _resolve(session, intent)
    state = IntentState(row.state)
    if state == target:
        return row
    if state != IntentState.PENDING:
        raise IntentStateError(
            f"intent {row.id} ({row.action} of job {row.job_id!r}) is already {state}; "
            f"refusing to mark it {target}"
        )
    row.state = target
    row.error = error
    row.finished_at = now
    return row


def _resolve(session: Session, intent: Intent | int) -> Intent:
    if isinstance(intent, IntentRow):
        return intent
    row = session.get(IntentRow, intent)
    if row is None:
        raise IntentStateError(f"no intent with id {intent}")
    return row


def relaunches(session: Session, job_id: str) -> int:
    """How often hops requeued the job after a failed launch (done relaunch intents)."""
    stmt = select(IntentRow.payload).where(
        IntentRow.job_id == job_id,
        IntentRow.action == IntentAction.REQUEUE_HOLD,
        IntentRow.state == IntentState.DONE,
    )
    return sum(1 for payload in session.scalars(stmt) if payload.get("relaunch"))


def released_by_hops(session: Session, job_id: str) -> bool:
    """The job's latest enacted change was hops's release (so its next run was hops's doing)."""
    return job_id in released_by_hops_among(session, [job_id])


def released_by_hops_among(session: Session, job_ids: Sequence[str]) -> set[str]:
    """The jobs of ``job_ids`` whose latest enacted change was hops's release (one query
    per chunk of ids, whatever the queue's length)."""
    out: set[str] = set()
    for start in range(0, len(job_ids), CHUNK):
        latest = (
            select(func.max(IntentRow.id))
            .where(
                IntentRow.job_id.in_(job_ids[start : start + CHUNK]),
                IntentRow.state == IntentState.DONE,
            )
            .group_by(IntentRow.job_id)
        )
        stmt = select(IntentRow.job_id).where(
            IntentRow.id.in_(latest), IntentRow.action == IntentAction.RELEASE
        )
        out.update(str(job_id) for job_id in session.scalars(stmt))
    return out


def last_requeue_done(session: Session, job_id: str) -> tuple[dict[str, Any], float | None] | None:
    """The payload of the job's latest done requeue and when it was taken (None: hops
    never requeued the job)."""
    stmt = (
        select(IntentRow.payload, IntentRow.finished_at)
        .where(
            IntentRow.job_id == job_id,
            IntentRow.action == IntentAction.REQUEUE_HOLD,
            IntentRow.state == IntentState.DONE,
        )
        .order_by(IntentRow.id.desc())
        .limit(1)
    )
    found = session.execute(stmt).first()
    if found is None or not found[0]:
        return None
    return dict(found[0]), found[1]


def last_requeue_was_relaunch(session: Session, job_id: str) -> bool:
    """The job's latest done requeue was hops's retry of a failed launch."""
    found = last_requeue_done(session, job_id)
    return found is not None and bool(found[0].get("relaunch"))


def intent_record(row: IntentRow) -> IntentRecord:
    return IntentRecord(
        id=row.id,
        job_id=row.job_id,
        action=IntentAction(row.action),
        payload=dict(row.payload),
        state=row.state,
        created_at=row.created_at,
        round_id=row.round_id,
    )


def notices_since(session: Session, since: float) -> dict[tuple[str, int], float]:
    """When hops signalled each (job, run) its checkpoint notice, since ``since``."""
    stmt = select(IntentRow.job_id, IntentRow.payload).where(
        IntentRow.action == IntentAction.NOTICE, IntentRow.created_at >= since
    )
    out: dict[tuple[str, int], float] = {}
    for job_id, payload in session.execute(stmt):
        sent = (payload or {}).get("sent_at")
        if job_id is not None and sent is not None:
            out[(str(job_id), int(payload.get("restarts", 0)))] = float(sent)
    return out
