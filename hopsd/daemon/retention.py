"""hopsd's side of retention: prune the ledger a few batches at a time between ticks.

The queries live in :mod:`hopsd.ledger.retention`. Here the daemon decides
when: every ``every_s`` seconds, and on the next tick again while a backlog is
left, at most ``max_batches`` short transactions each time so a tick is never
held up for long. Only a daemon that may act (holds the lease) prunes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hopsd.ledger.retention import Pruned, cutoff_of
from hopsd.ledger.unit import Ledger

log = logging.getLogger("hopsd.retention")


@dataclass
class Retention:
    ledger: Ledger
    every_s: float = 600.0
    batch: int = 500
    max_batches: int = 4
    _last: float | None = None
    _more: bool = False

    def due(self, now: float) -> bool:
        return self._more or self._last is None or now - self._last >= self.every_s

    def run(self, retention_days: float, now: float) -> Pruned | None:
        """Prune if due and retention is on; what was removed, or None when nothing ran."""
        if retention_days <= 0 or not self.due(now):
            return None
        cutoff = cutoff_of(now, retention_days)
        pruned = self.ledger.prune(cutoff, batch=self.batch, max_batches=self.max_batches)
        self._last, self._more = now, pruned.more
        if pruned.total:
            log.info(
                "event=ledger-pruned rounds=%d intents=%d allocations=%d predictions=%d more=%s",
                pruned.rounds,
                pruned.intents,
                pruned.allocations,
                pruned.predictions,
                str(pruned.more).lower(),
            )
        return pruned
