"""hopsd prunes the ledger between ticks when ``[ledger] retention_days`` is set."""

from __future__ import annotations

import dataclasses

from sqlalchemy import select

from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.ledger.models import RoundRow
from hopsd.ledger.retention import DAY_S
from hopsd.ledger.rounds import RoundSummary, record_round
from hopsd.slurm.tag import HopsTag


def _old(sessions) -> list[int]:  # type: ignore[no-untyped-def]
    """Numbers of the rounds seeded long ago (this test's ticks record newer ones)."""
    with sessions() as s:
        return sorted(s.scalars(select(RoundRow.number).where(RoundRow.started_at < 100)))


def test_service_prunes_old_rounds_after_a_tick_and_counts_them(config, port, sessions, clock):
    clock.advance(10 * DAY_S)
    with sessions.begin() as s:
        for number in range(1, 8):
            record_round(s, RoundSummary(number=100 + number, started_at=float(number)))
    port.add_job(HopsTag((1,), 1e6))
    keep = dataclasses.replace(config, retention_days=2.0)
    service = Service(Tick(keep, port, sessions, clock=clock))
    service.retention.batch, service.retention.max_batches = 3, 2
    service.run_once()  # two batches of three: one old round left for the next tick
    assert len(_old(sessions)) == 1
    clock.advance(1)
    service.run_once()
    assert _old(sessions) == []
    with sessions() as s:
        assert s.scalars(select(RoundRow)).first() is not None  # the ticks' own rounds stay
    pruned = service.metrics.pruned.labels("rounds")._value.get()  # type: ignore[attr-defined]
    assert pruned == 7


def test_retention_zero_keeps_everything(config, port, sessions, clock):
    clock.advance(10 * DAY_S)
    with sessions.begin() as s:
        record_round(s, RoundSummary(number=50, started_at=1.0))
    service = Service(Tick(dataclasses.replace(config, retention_days=0.0), port, sessions,
                           clock=clock))  # fmt: skip
    service.run_once()
    assert _old(sessions) == [50]
