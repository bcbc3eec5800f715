"""The planner's per-server speed prior, from what every job measured (the ledger).

The round's throughput store holds the planned jobs only; what tells a slow
server from its siblings is what *other* jobs, finished ones too, measured on
both (:mod:`hopsd.core.nodespeed`, the same factors ``hops nodes`` shows).
Reading every entity-layer row each tick would cost a query per tick for a
figure that moves slowly, so it is read again every ``every_s`` seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hopsd.core.model import Cluster
from hopsd.core.nodespeed import SpeedEvidence, evidence_of, speed_prior
from hopsd.ledger.records import ThroughputLayer

if TYPE_CHECKING:
    from hopsd.ledger.unit import Unit


def ledger_evidence(unit: Unit, node_type: dict[str, str]) -> SpeedEvidence:
    """What the ledger's entity-layer one-node rows say of each server."""
    rows = unit.throughputs(ThroughputLayer.ENTITY_AGGREGATED)
    return evidence_of(((r.job_id, r.place, r.size, r.per_gpu) for r in rows), node_type)


def ledger_factors(unit: Unit, node_type: dict[str, str]) -> dict[str, tuple[float, int]]:
    """Per node: (speed factor, jobs compared), as ``hops nodes`` shows them."""
    return ledger_evidence(unit, node_type).factors()


class NodeSpeeds:
    """The prior of the managed nodes, read from the ledger at most every ``every_s``."""

    def __init__(self, every_s: float = 30.0) -> None:
        self.every_s = every_s
        self._at: float | None = None
        self._prior: dict[str, float] = {}

    def prior(self, unit: Unit, cluster: Cluster, now: float) -> dict[str, float]:
        if self._at is None or now - self._at >= self.every_s or now < self._at:
            types = {n.id: n.gpu_type for n in cluster.nodes}
            self._prior = speed_prior(ledger_evidence(unit, types))
            self._at = now
        return dict(self._prior)
