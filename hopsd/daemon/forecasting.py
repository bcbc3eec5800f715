"""START and ETA: after a round is enacted, hopsd runs its step forward and records what it sees.

The forecast (:mod:`hopsd.sim.forecast`) starts from the snapshot the round
planned, with the round's plan applied; each job's predicted next start and
end go to the ledger when they changed (:mod:`hopsd.ledger.predictions`),
and ``hops status`` shows the newest. A forecast that fails is logged and
skipped: scheduling never waits on it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from hopsd.config import HopsConfig, policy_settings
from hopsd.core.model import Plan
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, StepOptions
from hopsd.ledger.records import Prediction
from hopsd.ledger.unit import Ledger, Unit
from hopsd.sim.arrivals import ArrivalModel, PastArrival
from hopsd.sim.forecast import ForecastInput, Predicted, forecast

log = logging.getLogger("hopsd.forecast")

#: A forecast waits at least this many times its last run's cost after it: forecasts take
#: at most about a tenth of hopsd's time, however long the queue (each is a simulation).
DUTY_FACTOR = 10.0
#: ... once one costs this much; cheaper ones run whenever due, as on any small cluster.
DUTY_FROM_S = 0.5
#: A tick that adopted at least this many jobs leaves its forecast to the next tick: adopting
#: a long queue (hopsd started or restarted over a backlog) makes a long tick already, and a
#: forecast changes no decision. The next tick forecasts, however little it saw change.
DEFER_AFTER_ADOPTING = 500


def measured_input(
    unit: Unit,
    config: HopsConfig,
    snapshot: Snapshot,
    clock: RoundClock,
    options: StepOptions | None = None,
    plan: Plan | None = None,
    *,
    test_only: bool = False,
) -> ForecastInput:
    """The forecast's input from a snapshot, with hopsd's latencies as the ledger measured
    them (launch, release to Slurm's start, profiling) and as hops.conf sets them (a new
    job is adopted within a queue refresh, an end is seen half a tick later on average),
    and the arrivals ``[forecast]`` expects (``test_only``: of ``--test-only``).
    One owner for hopsd's forecasts and ``hops submit --test-only``."""
    mode = config.forecast_test_only_arrivals if test_only else config.forecast_arrivals
    arrivals = ArrivalModel(mode, config.forecast_window_s)
    return ForecastInput(
        snapshot,
        clock,
        config.policy,
        config.settings(),
        options or StepOptions(),
        launch_s=max(unit.launch_s() or 0.0, 0.0),
        adoption_s=config.queue_refresh_s,
        profile_s=(unit.profiling_phase_s() or 0.0) if config.profiling else 0.0,
        start_lag_s=unit.start_lag_s() or 0.0,
        end_seen_s=config.queue_refresh_s / 2,
        plan=plan,
        policy_settings=policy_settings(config),
        arrivals=arrivals,
        ended=ended_arrivals(unit, snapshot.now, arrivals),
        arrivals_since=unit.first_submit_time() if arrivals.mode != "none" else None,
    )


def ended_arrivals(unit: Unit, now: float, model: ArrivalModel) -> tuple[PastArrival, ...]:
    """Jobs submitted in the arrival model's window that have ended (the live ones are
    in the snapshot), with the service they took; none read when no arrival is expected."""
    if model.mode == "none":
        return ()
    since = now - model.window_s
    return tuple(
        PastArrival(r.submit_time, r.demands, r.service_norm, r.user, r.batch_size, r.params)
        for r in unit.finished_jobs(since, now)
        if r.submit_time >= since
    )


class Forecaster:
    """Runs a forecast after every plan or change a tick saw (a job adopted, started,
    requeued or ended), and at least once a round while nothing changes."""

    def __init__(self) -> None:
        self.last_at: float | None = None
        # the last forecast's CPU seconds (other load does not count): the next waits
        # DUTY_FACTOR times that
        self.cost_s = 0.0
        # what the cost is read with: this process's CPU seconds
        self.cpu_clock: Callable[[], float] = time.process_time
        self.pending: ForecastInput | None = None
        self.states: Mapping[str, str] = {}
        # a tick that adopted many jobs left its forecast to the next one
        self.owed = False

    def due(self, changed: bool, now: float, round_s: float, adopted: int = 0) -> bool:
        """A plan or a change in Slurm changed what will happen, or the newest forecast is
        a round old; never sooner than :data:`DUTY_FACTOR` times the last one's cost.

        A tick that ``adopted`` :data:`DEFER_AFTER_ADOPTING` jobs or more forecasts
        nothing; the next tick does, whatever it saw (the forecast is owed).
        """
        if adopted >= DEFER_AFTER_ADOPTING:
            self.owed = True
            return False
        if self.last_at is None or self.owed:
            return True
        since = now - self.last_at
        if self.cost_s >= DUTY_FROM_S and since < DUTY_FACTOR * self.cost_s:
            return False
        return changed or since >= round_s

    def offer(self, given: ForecastInput, states: Mapping[str, str]) -> None:
        """The round's input and each job's ledger state, for :meth:`run` after enacting."""
        self.pending = given
        self.states = dict(states)
        self.owed = False

    def run(self, ledger: Ledger) -> float:
        """Forecast what was offered and record it; the seconds it took (0: nothing to do)."""
        given, self.pending = self.pending, None
        if given is None:
            return 0.0
        started, cpu = time.perf_counter(), self.cpu_clock()
        now = given.snapshot.now
        self.last_at = now
        try:
            seen = forecast(given)
        except Exception as exc:  # a forecast is advice: it never stops a tick
            log.error("event=forecast-failed error=%r kind=%s", str(exc), type(exc).__name__)
            self.cost_s = self.cpu_clock() - cpu
            return time.perf_counter() - started
        made = [self._prediction(p, now) for p in seen.values() if p.job_id in self.states]
        with ledger.unit() as unit:
            written = unit.record_predictions(made)
        took = time.perf_counter() - started
        self.cost_s = self.cpu_clock() - cpu
        log.info("event=forecast jobs=%d written=%d took_s=%.3f", len(made), written, took)
        return took

    def _prediction(self, p: Predicted, now: float) -> Prediction:
        return Prediction(
            p.job_id, now, self.states[p.job_id], p.start_at, p.end_at, p.gpu_type, p.gpus
        )
