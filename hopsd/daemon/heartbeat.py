"""The lease heartbeat: its own thread, so outages and slow ticks never cost the lease.

The lease says which hopsd may act on Slurm. Renewing it inside a successful
tick meant that any outage of slurmctld or the ledger longer than the lease's
time to live let it lapse, and the daemon then mistook its own expired lease
for a rival's and stopped. Here a :class:`LeaseKeeper` renews it every quarter
of the TTL whatever the ticks do:

* renewed: the daemon may act until the new expiry;
* our own lease expired (the ledger was away) and nobody took it: take it back;
* another daemon holds it: the lease is **lost** -- enacting stops at once
  (:meth:`LeaseKeeper.check` raises) and the service shuts down;
* the ledger does not answer: nothing is known, so the daemon may act only
  while the last confirmed expiry lies in the future (minus a safety margin),
  and tries again on the next beat. An outage of any length ends with the
  lease back and the daemon scheduling, without a restart.

Fencing. Each acquisition raises the lease's token; the keeper remembers the
token it acquired. Expiry alone cannot stop a daemon that was paused, or whose
clock runs behind, from acting after a standby took over, so :meth:`LeaseKeeper.check`
(before every Slurm write) and :meth:`LeaseKeeper.fence` (inside every intent
batch's transaction) also ask the ledger whether the lease still carries this
daemon's token. A takeover raised it, so the old leader records and enacts
nothing more. What stays open is a Slurm command already under way when the
check passed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from hopsd.daemon.logging import iso
from hopsd.ledger.errors import FencedError, LeaseLostError, LedgerUnavailableError
from hopsd.ledger.records import DEFAULT_LEASE
from hopsd.ledger.unit import LEDGER_FAILURES, LedgerLike, Unit, as_ledger

log = logging.getLogger("hopsd.lease")

#: Stop acting this long before the confirmed expiry, against clock skew and a
#: Slurm call that is already under way when the lease runs out.
SAFETY_MARGIN = 0.25


class LeaseKeeper:
    """Holds the daemon lease for ``holder``; ``check`` guards every Slurm write."""

    def __init__(
        self,
        ledger: LedgerLike,
        holder: str,
        ttl_s: float,
        *,
        clock: Callable[[], float] = time.time,
        name: str = DEFAULT_LEASE,
    ) -> None:
        self.ledger = as_ledger(ledger)
        self.holder = holder
        self.ttl_s = ttl_s
        self.clock = clock
        self.name = name
        self.expires_at = 0.0
        self.token: int | None = None
        self.lost: LeaseLostError | None = None
        self.beats = 0
        self.retaken = 0
        # Intent batches or Slurm writes refused because the token had moved on.
        self.fenced = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval_s(self) -> float:
        return max(self.ttl_s / 4.0, 0.05)

    def confirmed(self, expires_at: float, token: int | None = None) -> None:
        """Record an expiry (and the fencing token) known from the ledger after taking it.

        Without ``token`` the one the ledger holds for us now is read.
        """
        self.expires_at = expires_at
        if token is None:
            with self.ledger.unit() as unit:
                info = unit.lease_info(self.name)
            token = info.token if info is not None and info.holder == self.holder else -1
        self.token = token

    def may_act(self) -> bool:
        """True while the lease is ours for sure (confirmed and not about to run out)."""
        if self.lost is not None:
            return False
        return self.clock() < self.expires_at - SAFETY_MARGIN * self.ttl_s

    def check(self) -> None:
        """Raise unless this daemon may act on Slurm now (called before each write).

        First its own view (lost, or not confirmed lately), then the ledger's: the
        lease must still carry our fencing token.
        """
        if self.lost is not None:
            raise self.lost
        if not self.may_act():
            raise LeaseUnconfirmedError(self.name, self.holder, self.expires_at)
        try:
            with self.ledger.unit() as unit:
                self.fence(unit)
        except FencedError:
            raise
        except LEDGER_FAILURES as exc:
            raise LeaseUnconfirmedError(self.name, self.holder, self.expires_at) from exc

    def fence(self, unit: Unit) -> None:
        """Raise ``FencedError`` (and count the lease lost) unless the ledger still
        names us with our token; runs inside the caller's transaction."""
        if self.lost is not None:
            raise self.lost
        try:
            unit.check_fence(self.holder, -1 if self.token is None else self.token, self.name)
        except FencedError as exc:
            self.fenced += 1
            self.lost = exc
            log.error(
                "event=fenced holder=%s token=%s note='the lease has a newer token; "
                "this hopsd enacts nothing more'",
                exc.holder,
                self.token,
            )
            raise

    def beat(self) -> bool:
        """One heartbeat; True when the lease is confirmed ours afterwards."""
        if self.lost is not None:
            return False
        now = self.clock()
        try:
            with self.ledger.unit() as unit:
                return self._renew_or_retake(unit, now)
        except LEDGER_FAILURES as exc:
            log.warning(
                "event=lease-heartbeat-failed error=%r may_act_until=%s",
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                iso(self.expires_at - SAFETY_MARGIN * self.ttl_s),
            )
            return False

    def _renew_or_retake(self, unit: Unit, now: float) -> bool:
        try:
            info = unit.renew_lease(self.holder, self.ttl_s, now, self.name)
        except LeaseLostError:
            if not unit.acquire_lease(self.holder, self.ttl_s, now, self.name):
                other = unit.lease_info(self.name)
                holder = other.holder if other is not None and other.holder else "<nobody>"
                expires = other.expires_at if other is not None else 0.0
                self.lost = LeaseLostError(self.name, holder, expires)
                log.error(
                    "event=lease-lost holder=%s note='another hopsd took over; "
                    "this one stops acting on Slurm at once'",
                    holder,
                )
                return False
            self.retaken += 1
            log.warning(
                "event=lease-retaken holder=%s note='our lease had expired during an "
                "outage and nobody took it; taken back'",
                self.holder,
            )
            retaken = unit.lease_info(self.name)
            assert retaken is not None
            info = retaken
        self.beats += 1
        self.expires_at = info.expires_at
        self.token = info.token
        return True

    # -- the thread ----------------------------------------------------------------------

    def start(self, on_lost: Callable[[], None]) -> None:
        """Beat every ``interval_s`` in a daemon thread; call ``on_lost`` once if lost."""

        def loop() -> None:
            while not self._stop.wait(self.interval_s):
                self.beat()
                if self.lost is not None:
                    on_lost()
                    return

        self._thread = threading.Thread(target=loop, name="hopsd-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class LeaseUnconfirmedError(LedgerUnavailableError):
    """The lease could not be confirmed lately (ledger away): act on nothing for now."""

    def __init__(self, name: str, holder: str, expires_at: float) -> None:
        super().__init__(
            f"lease {name!r} of {holder!r} not confirmed since it ran out at "
            f"{expires_at:.3f}; not acting on Slurm until the ledger answers"
        )
