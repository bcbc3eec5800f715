"""The loop around the tick: APScheduler, back-off, signals, reload, metrics.

One interval job (``max_instances=1``, ``coalesce=True``, misfire grace of one
interval, UTC) runs :meth:`Service.run_once`. An exception in a tick is logged
and the loop goes on; a tick that overruns its interval is warned about. When
slurmctld is unreachable the service skips a growing number of ticks (1, 2, 4,
... capped) and then tries again; nothing is lost because every decision is in
the ledger and Slurm keeps its own state.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from types import FrameType

from apscheduler.schedulers.blocking import BlockingScheduler

from hopsd.config import ConfigError, HopsConfig
from hopsd.daemon.endpoint import Check
from hopsd.daemon.heartbeat import LeaseKeeper
from hopsd.daemon.metrics import DaemonMetrics
from hopsd.daemon.retention import Retention
from hopsd.daemon.tick import Tick
from hopsd.daemon.tick_result import TickResult
from hopsd.ledger.errors import LeaseLostError, LedgerUnavailableError
from hopsd.ledger.unit import DRIVER_ERRORS
from hopsd.slurm.errors import SlurmError, SlurmUnavailableError

log = logging.getLogger("hopsd.service")

MAX_BACKOFF_S = 60.0
# What a failed prune is logged for and tried again after (the ledger away, a driver error).
_PRUNE_FAILURES: tuple[type[BaseException], ...] = (LedgerUnavailableError, *DRIVER_ERRORS)


class Service:
    """Runs ticks on a schedule; ``run_once`` is also the test entry point."""

    def __init__(
        self,
        tick: Tick,
        *,
        metrics: DaemonMetrics | None = None,
        reload: Callable[[], HopsConfig] | None = None,
        lease: LeaseKeeper | None = None,
    ) -> None:
        self.tick = tick
        self.lease = lease
        self.metrics = metrics or DaemonMetrics()
        self.reload_config = reload
        self.failures = 0
        self.skip = 0
        self.ticks = 0
        self.fatal: BaseException | None = None
        self._lock = threading.Lock()
        self._scheduler: BlockingScheduler | None = None
        self._loops: int | None = None
        self.started_at = tick.clock()
        self.last_tick_at: float | None = None
        self.ledger_error = ""
        # True while this hopsd is a standby waiting for the lease: no ticks expected.
        self.waiting = False
        self.retention = Retention(tick.ledger)

    @property
    def interval_s(self) -> float:
        return self.tick.config.queue_refresh_s

    # -- one tick ------------------------------------------------------------------------

    def run_once(self) -> TickResult | None:
        """One tick with back-off and error handling; None when skipped or failed."""
        with self._lock:
            self.ticks += 1
            if self.skip > 0:
                self.skip -= 1
                log.info("event=backoff skipping_tick remaining=%d", self.skip)
                return None
            try:
                result = self.tick.run_once()
            except SlurmUnavailableError as exc:
                self._back_off(exc)
                return None
            except LeaseLostError as exc:
                log.error("event=lease-lost error=%r; stopping", str(exc))
                self.fatal = exc
                self.stop()
                return None
            except LedgerUnavailableError as exc:
                self.metrics.tick_errors.inc()
                self.ledger_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                log.error("event=tick-failed error=%r", str(exc))
                return None
            except SlurmError as exc:
                self.metrics.tick_errors.inc()
                self.metrics.slurm_errors.labels(type(exc).__name__).inc()
                log.error("event=tick-failed error=%r", str(exc))
                return None
            except Exception:
                self.metrics.tick_errors.inc()
                log.exception("event=tick-failed unexpected error; the loop goes on")
                return None
            if self.failures:
                log.info("event=slurm-recovered after_failures=%d", self.failures)
            self.failures = 0
            self.ledger_error = ""
            self.last_tick_at = result.started_at
            self._observe(result)
            self._prune(result.started_at)
            return result

    def _prune(self, now: float) -> None:
        """Retention between ticks; a failure is logged and tried again next time."""
        if self.lease is not None and not self.lease.may_act():
            return
        try:
            pruned = self.retention.run(self.tick.config.retention_days, now)
        except _PRUNE_FAILURES as exc:
            log.warning("event=prune-failed error=%r", str(exc).splitlines()[0])
            return
        if pruned is not None:
            for table in ("rounds", "intents", "allocations", "predictions"):
                self.metrics.pruned.labels(table).inc(getattr(pruned, table))

    def _back_off(self, exc: SlurmUnavailableError) -> None:
        self.failures += 1
        self.metrics.slurm_errors.labels("unavailable").inc()
        cap = max(int(MAX_BACKOFF_S / self.interval_s), 1)
        self.skip = min(2 ** (self.failures - 1), cap)
        log.warning(
            "event=slurm-unavailable failures=%d skip_ticks=%d error=%r",
            self.failures,
            self.skip,
            str(exc),
        )

    def _observe(self, result: TickResult) -> None:
        m = self.metrics
        m.tick_seconds.observe(result.total_s)
        m.last_tick.set(result.started_at)
        m.leader.set(1 if self.lease is None or self.lease.may_act() else 0)
        m.set_gpus(result.gpu_use)
        for action in result.would_enact:
            m.would_enact.labels(action.kind).inc()
        m.slurm_calls.inc(result.slurm_calls)
        m.queue_length.set(result.queued)
        m.running_jobs.set(result.running)
        if result.decision is not None:
            m.decision_seconds.labels(result.decision.kind).observe(result.decision.decision_s)
            m.window_size.set(len(result.decision.plan.window))
            m.idle_gpus_waiting.set(result.decision.idle_gpus_waiting)
        m.set_latency_ratios(result.latency_ratios)
        if result.reconcile is not None:
            m.adopted.inc(len(result.reconcile.adopted))
            m.rejected.inc(len(result.reconcile.rejected))
        for report in (result.resumed, result.enacted):
            if report is not None:
                m.count_enacted(report)
        if result.total_s > self.interval_s:
            log.warning(
                "event=tick-overrun took_s=%.3f interval_s=%.3f", result.total_s, self.interval_s
            )
        log.debug("event=tick %s", " ".join(f"{k}={v:.4f}" for k, v in result.figures().items()))

    # -- health ----------------------------------------------------------------------------

    def stale_after_s(self) -> float:
        """A tick older than this means the loop is stuck (three intervals, at least 60 s)."""
        return max(3 * self.interval_s, 60.0)

    def health_checks(self) -> dict[str, Check]:
        """The checks ``/healthz`` runs: Slurm reachable, ledger usable, ticks recent."""

        def slurm() -> str | None:
            if self.failures:
                return f"slurmctld unreachable for {self.failures} tick(s); backing off"
            return None

        def ledger() -> str | None:
            if not self.ledger_error:
                return None
            return f"last tick could not use the ledger: {self.ledger_error}"

        def tick() -> str | None:
            if self.waiting:
                return None
            since = self.last_tick_at if self.last_tick_at is not None else self.started_at
            age = self.tick.clock() - since
            if age <= self.stale_after_s():
                return None
            what = "no tick completed" if self.last_tick_at is None else "last tick completed"
            return f"{what} for {age:.0f} s (limit {self.stale_after_s():.0f} s)"

        return {"slurm": slurm, "ledger": ledger, "tick": tick}

    # -- the loop ------------------------------------------------------------------------

    def _scheduled(self) -> None:
        self.run_once()
        if self._loops is not None and self.ticks >= self._loops:
            self.stop()

    def start(self, loops: int | None = None, install_signals: bool = True) -> None:
        """Run ticks every ``queue_refresh_s`` until stopped (or after ``loops`` ticks)."""
        self._loops = loops
        scheduler = BlockingScheduler(timezone=UTC)
        self._scheduler = scheduler
        scheduler.add_job(
            self._scheduled,
            "interval",
            seconds=self.interval_s,
            id="tick",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(int(self.interval_s), 1),
            next_run_time=datetime.now(UTC),
        )
        if install_signals:
            self._install_signals()
        if self.lease is not None:
            self.lease.start(on_lost=self._lease_lost)
        log.info("event=service-start interval_s=%.3f loops=%s", self.interval_s, loops)
        try:
            scheduler.start()
        finally:
            if self.lease is not None:
                self.lease.stop()
        with self._lock:  # the tick in flight (if any) finishes before we return
            pass
        log.info("event=service-stop ticks=%d", self.ticks)

    def _lease_lost(self) -> None:
        """Called from the heartbeat thread: another hopsd took over; stop for good."""
        assert self.lease is not None and self.lease.lost is not None
        self.metrics.leader.set(0)
        log.error("event=lease-lost error=%r; stopping", str(self.lease.lost))
        self.fatal = self.lease.lost
        self.stop()

    def stop(self) -> None:
        scheduler = self._scheduler
        if scheduler is not None and scheduler.running:
            scheduler.shutdown(wait=False)

    def reload(self) -> None:
        """Re-read the configuration; an invalid one is logged and the old one kept."""
        if self.reload_config is None:
            return
        try:
            config = self.reload_config()
        except ConfigError as exc:
            log.error("event=reload-failed keeping_old_config error=%r", str(exc))
            return
        old_interval = self.interval_s
        with self._lock:
            self.tick.reconfigure(config)
        if self._scheduler is not None and config.queue_refresh_s != old_interval:
            self._scheduler.reschedule_job("tick", trigger="interval", seconds=self.interval_s)
        log.info("event=reloaded path=%s interval_s=%.3f", config.path, self.interval_s)

    def _install_signals(self) -> None:
        def on_stop(signum: int, _frame: FrameType | None) -> None:
            log.info(
                "event=signal name=%s stopping_after_current_tick", signal.Signals(signum).name
            )
            self.stop()

        def on_hup(_signum: int, _frame: FrameType | None) -> None:
            threading.Thread(target=self.reload, daemon=True).start()

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGHUP, on_hup)
