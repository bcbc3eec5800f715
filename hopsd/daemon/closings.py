"""Which managed nodes are closing this tick: drained ones and those of reservations.

A drained (or down) node takes no new work; ``[slurm] on_drain`` says whether
its running hops jobs finish there (``finish``, the default) or move off at the
next round (``move``). A reservation closes its nodes at its start: hops jobs
are not submitted into reservations, so from then on they cannot run there.
Jobs that would not finish by then are moved off from ``2 * round_length_s +
checkpoint_grace_s`` plus :data:`RELAUNCH_MARGIN_S` before it: the move is
decided at the first round in that lead, and its notice, requeue and relaunch
elsewhere are done before the reservation begins.
The rules themselves are the core's (:mod:`hopsd.core.closing`).

Reservations are read at most every ``queue_refresh_s`` (they change rarely,
and a tick should cost its two batched reads); a backend that cannot read them
is said once in the log, and then only drains count.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from hopsd.config import HopsConfig
from hopsd.core.closing import Window, node_closings
from hopsd.core.model import NodeClosing
from hopsd.daemon.views import ObservedNode
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.parse_reservations import SlurmReservation
from hopsd.slurm.reservations import read_reservations

log = logging.getLogger(__name__)

#: Seconds a requeue takes to settle and the job to start elsewhere, beyond its notice.
RELAUNCH_MARGIN_S = 60.0


class Reservations:
    """The port's reservations, read again once ``refresh_s`` has passed."""

    def __init__(self, port: object, refresh_s: float) -> None:
        self.port = port
        self.refresh_s = refresh_s
        self.known: list[SlurmReservation] = []
        self.read_at: float | None = None
        self.unsupported = False

    def current(self, now: float) -> list[SlurmReservation]:
        """The last reservations read, refreshed when due (kept as they were on an error)."""
        if self.unsupported:
            return []
        if self.read_at is not None and now - self.read_at < self.refresh_s:
            return self.known
        self.read_at = now
        try:
            found = read_reservations(self.port)
        except SlurmError as exc:
            log.warning("event=reservations-unreadable error=%r", str(exc))
            return self.known
        if found is None:
            self.unsupported = True
            backend = getattr(self.port, "name", type(self.port).__name__)
            log.warning(
                "event=reservations-unsupported backend=%s: reservations are not read; "
                "hops may place jobs on nodes a reservation will take",
                backend,
            )
            return []
        self.known = found
        return found


def closings(
    nodes: Sequence[ObservedNode],
    reservations: Sequence[SlurmReservation],
    managed: Collection[str],
    config: HopsConfig,
    now: float,
) -> dict[str, NodeClosing]:
    """The closing nodes among ``managed`` (see the module docstring)."""
    notice_s = 2 * config.round_length_s + config.checkpoint_grace_s + RELAUNCH_MARGIN_S
    windows = [Window(r.start, r.end, r.nodes) for r in reservations]
    unusable = [n.name for n in nodes if not n.usable]
    found = node_closings(
        now, unusable, windows, move_on_drain=config.on_drain == "move", notice_s=notice_s
    )
    return {n: c for n, c in found.items() if n in managed}
