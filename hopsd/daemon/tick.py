"""One daemon tick: observe -> reconcile -> resume -> decide -> record -> enact.

Every step's cost is measured so the service can report it and the benchmark
can print it. A tick is self-contained: its state lives in the ledger, so a
daemon restarted between any two steps carries on from what was committed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

from hopsd.config import HopsConfig, policy_settings
from hopsd.core.act import Act, act
from hopsd.core.closing import ClosingAware
from hopsd.core.errors import HopsError
from hopsd.core.fairshare import FairShareRule, Usage
from hopsd.core.model import Plan
from hopsd.core.policies import Policy
from hopsd.core.quota import held_back, with_quota
from hopsd.core.reserve import reserve
from hopsd.core.scoring import Scores, score_jobs
from hopsd.core.sizeclaim import SizeRule
from hopsd.core.snapshot import PendingJob, Snapshot
from hopsd.core.step import IDLE, RoundClock, StepOptions, scored
from hopsd.daemon.assemble import Assembled, assemble
from hopsd.daemon.closings import Reservations
from hopsd.daemon.decide import (
    Decision,
    actions_from_plan,
    chains,
    decide,
    notice_of,
)
from hopsd.daemon.enact import (
    Enactor,
    EnactReport,
    SettleOptions,
    Step,
)
from hopsd.daemon.faults import Faults, NoFaults
from hopsd.daemon.flights import in_flight, requeue_unplanned, unplanned
from hopsd.daemon.forecasting import Forecaster, measured_input
from hopsd.daemon.gpu_use import gpu_use
from hopsd.daemon.heartbeat import LeaseKeeper
from hopsd.daemon.holds import hold_intents, pending_jobs
from hopsd.daemon.job_control import ReleaseNotes
from hopsd.daemon.node_speeds import NodeSpeeds
from hopsd.daemon.observe import final_states, observe, read_queue
from hopsd.daemon.profiling import Profiler, ProfilingOptions
from hopsd.daemon.reconcile import Reconciler, ReconcileReport
from hopsd.daemon.relaunch import launch_failures, relaunch_or_end
from hopsd.daemon.resume import resume_steps
from hopsd.daemon.round_notes import (
    ended_jobs,
    record_estimate_sources,
    round_note,
    worth_recording,
)
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.shadow import ShadowMemory
from hopsd.daemon.slurm_policy import (
    planned_ids,
    quota_of,
    slurm_policy_of,
    type_max_times,
    with_reasons,
)
from hopsd.daemon.slurm_requeues import latest_ends
from hopsd.daemon.snapshot_builder import build_cluster_view
from hopsd.daemon.spool import UnsafeSpool, prepare_root
from hopsd.daemon.tick_result import TickResult
from hopsd.daemon.views import Observation, ObservedJob
from hopsd.ledger.records import (
    JobRecord,
    JobUpdate,
    RoundSummary,
    changes_from_plan,
)
from hopsd.ledger.unit import LedgerLike, Unit, as_ledger
from hopsd.plugins import get_policy
from hopsd.slurm.errors import SlurmCommandError
from hopsd.slurm.parse_limits import SlurmLimits
from hopsd.slurm.port import SlurmPort

log = logging.getLogger("hopsd.tick")

T = TypeVar("T")


class Tick:
    """The tick and the little state it keeps between ticks (when the last round ran)."""

    def __init__(
        self,
        config: HopsConfig,
        port: SlurmPort,
        ledger: LedgerLike,
        *,
        shadow: bool = False,
        clock: Callable[[], float] = time.time,
        lease: LeaseKeeper | None = None,
        call_count: Callable[[], int] | None = None,
        adopt_filter: Callable[[ObservedJob], bool] | None = None,
        sensing: Sensing | None = None,
        faults: Faults | None = None,
    ) -> None:
        self.config = config
        self.settings = config.settings()
        self.port = port
        self.ledger = as_ledger(ledger)
        self.shadow = shadow
        self.clock = clock
        self.lease = lease
        if lease is not None:  # every intent batch is recorded under our fencing token
            self.ledger.fence = lease.fence
        self.call_count = call_count or (lambda: 0)
        self.faults = faults or NoFaults()
        self.reconciler = Reconciler(
            config, self._accounting, adopt_filter, sensing, run_ends=self._run_ends
        )
        self.profiler = Profiler(ProfilingOptions.of(config, shadow), self.reconciler.sensing)
        self.reconciler.profile_new_jobs = self.profiler.options.enabled
        self.enactor = Enactor(
            port,
            self.ledger,
            clock,
            self._running_now,
            settle=_settle_of(config),
            guard=lease.check if lease is not None else None,
            before_release=ReleaseNotes(
                self.ledger, self.reconciler.sensing, lambda: self.config.profiling_iterations
            ),
            checkpointed_since=self.reconciler.sensing.checkpointed_since,
            faults=self.faults,
        )
        self.round_clock = RoundClock(self.settings.round_length_s)
        # the policy's own settings ([policies.NAME]): a change on reload rebuilds it
        self.own_settings = policy_settings(config)
        self.policy = ClosingAware(get_policy(config.policy, self.own_settings))
        self.reservations = Reservations(port, min(config.queue_refresh_s, config.round_length_s))
        self._steps: list[Step] = []
        # released jobs the last observation showed crowded out (hopsd.daemon.assemble)
        self._crowded: frozenset[str] = frozenset()
        # Slurm ids of the holds asked this tick (this daemon's once-per-job record: below)
        self._asking: set[int] = set()
        # the tick's intents requeue a job now, not at a plan's pace: reconcile after enacting
        self._follow_enacted = False
        # the Slurm calls of this tick's own batched reads, and its observations
        self._reads = 0
        self._observations = 0
        self.shadow_memory = ShadowMemory()
        self.forecaster = Forecaster()
        self.slurm_policy = slurm_policy_of(config, port)
        self.node_speeds = NodeSpeeds()

    def reconfigure(self, config: HopsConfig) -> None:
        """Take a reloaded configuration (SIGHUP); the round clock carries on."""
        self.config = config
        self.settings = config.settings()
        self.round_clock = RoundClock(self.settings.round_length_s, self.round_clock.last_round_at)
        own = policy_settings(config)
        if config.policy != self.policy.name or own != self.own_settings:
            self.policy = ClosingAware(get_policy(config.policy, own))
        self.own_settings = own
        self.reconciler.config = config
        self.reconciler.sensing.spools.shared = self._checked_spool(config)
        self.profiler.options = ProfilingOptions.of(config, self.shadow)
        self.reconciler.profile_new_jobs = self.profiler.options.enabled
        self.enactor.settle = _settle_of(config)
        self.slurm_policy = slurm_policy_of(config, self.port)

    def _checked_spool(self, config: HopsConfig) -> Path | None:
        """The reloaded spool if hopsd may use it (:func:`prepare_root`), else the current one."""
        current = self.reconciler.sensing.spools.shared
        spool = Path(config.spool_dir) if config.spool_dir else None
        if spool is None or spool == current:
            return spool
        try:
            prepare_root(spool)
        except UnsafeSpool as exc:
            log.error(
                "event=spool-refused key=daemon.spool_dir error=%r kept=%s", str(exc), current
            )
            return current
        return spool

    # -- the tick ------------------------------------------------------------------------

    def run_once(self) -> TickResult:
        calls_before = self.call_count()
        self._reads = self._observations = 0
        started = time.perf_counter()
        now = self.clock()
        result = TickResult(started_at=now)

        obs = self._timed(result, "observe_s", self._observe)
        result.reconcile = self._timed(result, "reconcile_s", lambda: self._reconcile(obs, now))
        if not self.shadow:
            seen = obs
            obs = self._timed(result, "resume_s", lambda: self._resume(seen, result))
            if obs is not seen:
                self._follow_own_actions(obs, result)
        self._decide_and_record(obs, result)
        self.reconciler.holds.asked |= self._asking  # asked once the intents are in the ledger
        if result.actions and not self.shadow:
            self.faults.intents_committed()
            result.enacted = self._timed(result, "enact_s", lambda: self._enact(result))
            if self._follow_enacted:  # a requeue of an unplanned start: the ledger follows now
                self._follow_own_actions(self._observe(), result)
        result.forecast_s = self.forecaster.run(self.ledger)
        result.total_s = time.perf_counter() - started
        result.slurm_calls = self.call_count() - calls_before
        result.batched_reads, result.observations = self._reads, self._observations
        return result

    def _counted(self, read: Callable[[], T]) -> T:
        """Run one of the tick's batched reads, adding the Slurm calls it made to the tick's."""
        before = self.call_count()
        try:
            return read()
        finally:
            self._reads += self.call_count() - before

    def _observe(self) -> Observation:
        """One observation: the queue (whose narrow read may need the full one) and the nodes."""
        self._observations += 1
        return self._counted(lambda: observe(self.port, self.clock))

    def _follow_own_actions(self, obs: Observation, result: TickResult) -> None:
        """Reconcile again after resumed intents changed Slurm (a requeue, a release).

        The plan is made from the fresh observation; without this the ledger
        would follow it only at the next tick, which under load starts seconds
        later: meanwhile ``hops status`` said a job requeued by hops still ran.
        """
        again = self._timed(result, "reconcile_s", lambda: self._reconcile(obs, self.clock()))
        if result.reconcile is None:
            result.reconcile = again
        else:
            result.reconcile.extend(again)

    @staticmethod
    def _timed(result: TickResult, name: str, step: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return step()
        finally:
            setattr(result, name, getattr(result, name) + time.perf_counter() - started)

    def _running_now(self) -> set[int]:
        """The jobs running this instant (the narrow read: it states each job's state exactly,
        and sooner than the full read, which narrows the requeue race it guards)."""
        return {j.job_id for j in self._counted(lambda: read_queue(self.port)) if j.running}

    def _accounting(self, slurm_ids: Sequence[int]) -> Mapping[int, ObservedJob]:
        try:
            return self._counted(lambda: final_states(self.port, slurm_ids))
        except SlurmCommandError as exc:
            log.warning("event=accounting-unavailable error=%r", str(exc))
            return {}

    def _run_ends(self, slurm_ids: Sequence[int]) -> Mapping[int, str]:
        """How each job's latest run ended, from accounting (empty where none is kept)."""
        try:
            return latest_ends(self._counted(lambda: self.port.runs(slurm_ids)))
        except SlurmCommandError as exc:
            log.warning("event=accounting-unavailable error=%r", str(exc))
            return {}

    def _reconcile(self, obs: Observation, now: float) -> ReconcileReport:
        view = build_cluster_view(obs.nodes, self.config, {})
        with self.ledger.unit() as unit:
            return self.reconciler.run(unit, obs, view, now)

    def _resume(self, obs: Observation, result: TickResult) -> Observation:
        """Finish or drop intents a crash left pending, then re-observe if anything was done."""
        with self.ledger.unit() as unit:
            pending = [Step.of(r) for r in unit.pending_intents()]
        if not pending:
            return obs
        plan = resume_steps(pending, obs.job_map(), self.clock(), self.settings.round_length_s)
        log.info(
            "event=resume pending=%d run=%d already_done=%d abandon=%d",
            len(pending),
            len(plan.to_run) - len(plan.already_done),
            len(plan.already_done),
            len(plan.to_abandon),
        )
        report = self.enactor.abandon(plan.to_abandon)
        done = self.enactor.run(plan.to_run, plan.already_done)
        report.done += done.done
        report.failed += done.failed
        report.abandoned += done.abandoned
        result.resumed = report
        if len(plan.to_run) > len(plan.already_done):
            return self._observe()
        return obs

    # -- deciding ------------------------------------------------------------------------

    def _usage(self, unit: Unit, now: float) -> Usage | None:
        """Decayed usage per user and account, summed in the ledger (one query, any history).

        The step turns it into share factors (:func:`hopsd.core.fairshare.apply_fair_share`).
        """
        if self.config.fairshare_weight == 0:
            return None
        users, accounts = unit.decayed_usage(now, self.config.fairshare_half_life_h * 3600.0)
        return Usage(users, accounts)

    def _decide_and_record(self, obs: Observation, result: TickResult) -> None:
        now = self.clock()
        self._steps = []
        self._asking = set()
        self._follow_enacted = False
        with self.ledger.unit() as unit:
            rows = [r for r in unit.active_records() if r.slurm_job_id is not None]
            ids = [r.id for r in rows]
            store = unit.throughput_snapshot(ids)
            built = assemble(
                rows,
                obs,
                self.config,
                unit.latest_targets(ids),
                store,
                now,
                self.reconciler.problems.guard,
                self.reservations.current(now),
                self._crowded,
            )
            self._crowded = built.crowded
            store.set_node_speeds(self.node_speeds.prior(unit, built.view.cluster, now))
            pending = in_flight(unit)
            waiting = frozenset(f.job_id for f in pending)
            profilees = self.profiler.profilees(unit, rows, obs, built.view, now, waiting)
            given = dataclasses.replace(
                built.snapshot,
                profiling=profilees,
                usage=self._usage(unit, now),
                in_flight=pending,
                unplanned=unplanned(rows),
                launch_failures=launch_failures(unit, rows, obs),
                pending=self._pending(unit, rows, obs),
            )
            # the core's reserve stage, taken once: the figures and quota below count
            # what the step plans, and the step is handed the reserved snapshot
            snap = reserve(given)
            built = dataclasses.replace(built, snapshot=snap, waiting=waiting)
            result.queued, result.running = len(snap.queued), len(snap.running)
            result.gpu_use = gpu_use(snap)
            options = dataclasses.replace(self._step_options(), score=True)
            started = time.perf_counter()
            try:
                policy, held = self._within_limits(obs, built)
                decision, clock = decide(snap, self.round_clock, policy, self.settings, options)
                decision = with_reasons(decision, held(decision.plan))
            except HopsError as exc:
                log.error("event=plan-failed policy=%s error=%r", self.policy.name, str(exc))
                # no plan: the act stage still judges what Slurm did without hops
                surprises = (snap.unplanned, snap.launch_failures)
                no_plan = act(Plan(), snap.listening, options.notice, *surprises)
                self._act_on_slurm(unit, rows, obs, built, no_plan, result, now)
                self._note_latency(built, result, unit, scored(snap, self.settings, options))
                return
            finally:
                result.decide_s = time.perf_counter() - started
            self._act_on_slurm(unit, rows, obs, built, decision.actions, result, now)
            self._note_latency(built, result, unit, decision.scores or Scores())
            self.round_clock = clock
            # the forecast plans around work in flight itself (in its engine's step)
            self._offer_forecast(unit, rows, given, decision, clock, result.reconcile)
            self._record_doubts(unit, decision)
            built = self._profile(unit, rows, obs, built, decision, result, now)
            if decision.kind == IDLE:
                return
            result.decision = decision
            unit.write_values(
                "plan_reason", {job_id: why[:500] for job_id, why in decision.reasons.items()}
            )
            for job_id in decision.spared:
                log.info("event=spare job=%s reason=%r", job_id, decision.reasons.get(job_id))
            started = time.perf_counter()
            self._record(unit, built, decision, result, now)
            result.record_s = time.perf_counter() - started

    def _offer_forecast(
        self,
        unit: Unit,
        rows: Sequence[JobRecord],
        snap: Snapshot,
        decision: Decision,
        clock: RoundClock,
        seen: ReconcileReport | None,
    ) -> None:
        """Hand the round's input and plan to the forecaster, when a forecast is due: the
        step planned, or this tick saw a job adopted, started, requeued or ended (a tick
        that adopted a long queue leaves it to the next: :meth:`Forecaster.due`)."""
        planned = decision.kind != IDLE
        moved = seen is not None and bool(
            seen.adopted or seen.started or seen.requeued or seen.ended
        )
        adopted = len(seen.adopted) if seen is not None else 0
        round_s = self.settings.round_length_s
        due = self.forecaster.due(planned or moved, snap.now, round_s, adopted)
        if self.shadow or not due:
            return
        plan = decision.plan if planned else None
        given = measured_input(unit, self.config, snap, clock, self._step_options(), plan)
        self.forecaster.offer(given, {r.id: str(r.state) for r in rows})

    def _within_limits(
        self, obs: Observation, built: Assembled
    ) -> tuple[Policy, Callable[[Plan], dict[str, str]]]:
        """The policy, kept within Slurm's GPU limits when hops.conf asks (``[slurm] limits``),
        and why each job those limits keep out of the plan waits."""
        if self.slurm_policy.limits is None:
            return self.policy, lambda plan: {}
        limits = self.slurm_policy.gpu_limits() or SlurmLimits()
        view = built.view
        types = {n.id: n.gpu_type for n in view.cluster.nodes}
        times = type_max_times(view.partition_of, types, self.slurm_policy.partition_times())
        planned = planned_ids(built.handles, [j.id for j in built.snapshot.jobs])
        quota = quota_of(limits, obs, planned, times)
        return with_quota(self.policy, quota), partial(held_back, built.snapshot, quota)

    def _step_options(self) -> StepOptions:
        """Sparing guards a job near its end (:attr:`HopsConfig.spare_guard_s`)."""
        shares = self.slurm_policy.share_table()
        return StepOptions(
            spare_guard_s=self.config.spare_guard_s,
            notice=notice_of(self.config) is not None,
            profiling=self.profiler.options.rules,
            fairshare=FairShareRule(
                self.config.shares if shares is None else shares, self.config.fairshare_weight
            ),
            sizes=SizeRule(self.config.size_check_factor, self.config.size_check_slack_s),
        )

    @staticmethod
    def _record_doubts(unit: Unit, decision: Decision) -> None:
        """Keep (and log, once) why a job's claimed size is no longer believed: the step
        reads it back from the ledger, so the doubt outlives a restart of hopsd."""
        fresh = [v for v in decision.doubted if v.new]
        for verdict in fresh:
            log.warning(
                "event=size-doubted job=%s claimed=%g believed=%.0f reason=%r",
                verdict.job_id,
                verdict.claimed,
                verdict.believed,
                verdict.reason,
            )
        unit.update_jobs([JobUpdate(v.job_id, size_doubt=v.reason[:500]) for v in fresh])

    def _pending(
        self, unit: Unit, rows: Sequence[JobRecord], obs: Observation
    ) -> tuple[PendingJob, ...]:
        """The pending jobs whose hold the act stage judges (none in shadow mode)."""
        if self.shadow:
            return ()
        return pending_jobs(unit, rows, obs, self.reconciler.holds.asked)

    def _act_on_slurm(
        self,
        unit: Unit,
        rows: Sequence[JobRecord],
        obs: Observation,
        built: Assembled,
        acts: Sequence[Act],
        result: TickResult,
        now: float,
    ) -> None:
        """Write the intents of the act stage's holds, requeues of unplanned starts and
        relaunches (:mod:`hopsd.core.act`); a failed launch not relaunched ends (reconcile
        deferred it). A shadow daemon asks nothing of Slurm: every failed launch ends there."""
        report = result.reconcile = result.reconcile or ReconcileReport()
        end = self.reconciler.ender(unit, built.view, now, report)
        acts = () if self.shadow else acts
        hold_actions, hold_requests = hold_intents(acts, rows, obs)
        holds = unit.record_intents(hold_requests, None, now) if hold_requests else []
        self._asking = {a.slurm_id for a in hold_actions}
        failures = built.snapshot.launch_failures
        actions, intents = relaunch_or_end(unit, failures, acts, rows, obs, end, now)
        report.requeued.extend(a.job_id for a in actions)
        more, also = requeue_unplanned(unit, acts, rows, obs, self.config, now)
        result.actions = [*result.actions, *hold_actions, *actions, *more]
        self._steps = [*self._steps, *(Step.of(r) for r in (*holds, *intents, *also))]
        self._follow_enacted = self._follow_enacted or bool(intents or also)

    def _profile(
        self,
        unit: Unit,
        rows: Sequence[JobRecord],
        obs: Observation,
        built: Assembled,
        decision: Decision,
        result: TickResult,
        now: float,
    ) -> Assembled:
        """Enact the step's profiling decision: intents for its runs, queued jobs for its ends.

        A run that is stopped gets the checkpoint notice moves and preemptions
        get (the profiling run is the job itself, training on), unless it never
        reported anything: such a job does not use the probe, so nothing would
        hear the signal. Jobs whose profiling ended were planned in the same
        step; their handles join the assembled ones so their starts are enacted too.
        """
        if not decision.profiling.acted or self.shadow:
            return built  # shadow mode enacts nothing, profiling included
        enacted = self.profiler.enact(
            unit, decision.profiling, rows, obs, built.view, self.config, now
        )
        if enacted.actions:
            listening = {a.job_id for a in enacted.actions} - set(enacted.unheard)
            notice = notice_of(self.config)
            requests = chains(enacted.actions, enacted.reasons, notice, listening)
            intents = unit.record_intents(requests, None, now)
            result.actions = [*result.actions, *enacted.actions]
            self._steps = [*self._steps, *(Step.of(r) for r in intents)]
        return dataclasses.replace(built, handles={**built.handles, **enacted.handles})

    def _note_latency(
        self, built: Assembled, result: TickResult, unit: Unit, scores: Scores
    ) -> None:
        """Record every active job's latency ratio and Themis rho as the step scored them,
        and the final LR of jobs that just ended (:mod:`hopsd.core.scoring`).

        The ledger keeps them so ``hops status`` and ``hops fairness`` show the
        core's figures and RAQLR can average the finished ones; ended jobs are
        scored even when the queue is empty. A job the core could not score is
        reported as that job's problem.
        """
        handles = built.handles
        for job_id, exc in scores.failed:
            slurm_id = handles[job_id].slurm_id if job_id in handles else 0
            self.reconciler.problems.failed(slurm_id, "latency", exc)
        ratios = dict(scores.latency_ratio)
        result.latency_ratios = list(ratios.values())
        ended = [job_id for job_id, _ in (result.reconcile.ended if result.reconcile else [])]
        rows = unit.jobs([j for j in ended if j not in ratios])  # the scored need no reading
        final = score_jobs(built.snapshot, self.settings, (), ended=ended_jobs(rows, ratios))
        ratios.update(final.latency_ratio)
        # every active job's, each tick: written at once, not row by row (a job the ledger
        # does not hold is skipped)
        unit.write_values("latency_ratio", ratios)
        unit.write_values("ftf_rho", scores.ftf_rho)

    def _record(
        self,
        unit: Unit,
        built: Assembled,
        decision: Decision,
        result: TickResult,
        now: float,
    ) -> None:
        plan = decision.plan
        actions = actions_from_plan(plan, built.handles, built.view.partition_of)
        if decision.kind == "fragment" and not actions:
            return
        snap = built.snapshot
        summary = RoundSummary(
            number=unit.next_round_number(self.shadow),
            started_at=now,
            queued=len(snap.queued),
            running=len(snap.running),
            window_size=len(plan.window),
            objective=plan.objective,
            decision_s=decision.decision_s,
            idle_gpus_waiting=decision.idle_gpus_waiting,
            shadow=self.shadow,
            note=round_note(decision.kind, actions, plan),
        )
        round_row = unit.record_round(summary)
        if self.shadow:
            alive = {j.id for j in snap.jobs}
            result.would_enact = self.shadow_memory.fresh(actions, alive)
        for action in result.would_enact if self.shadow else actions:
            log.info(
                "event=%s round=%d job=%s slurm_job=%s action=%s shadow=%s",
                "would-enact" if self.shadow else "decide",
                round_row.number,
                action.job_id,
                action.slurm_id,
                action.describe(),
                str(self.shadow).lower(),
            )
        if self.shadow:
            return
        changes = [c for c in changes_from_plan(plan) if worth_recording(c, decision.kind)]
        unit.record_allocations(round_row.id, changes, now)
        record_estimate_sources(
            unit, decision.planned or snap, actions, self.settings, self.reconciler.problems
        )
        reasons = {a.job_id: f"{decision.kind} {round_row.number}: {a.describe()}" for a in actions}
        # who is given notice is the step's to say (hopsd.core.act)
        listening = {a.job_id for a in decision.actions if a.notice}
        requests = chains(actions, reasons, notice_of(self.config), listening)
        intents = unit.record_intents(requests, round_row.id, now)
        result.actions = [*result.actions, *actions]
        self._steps = [*self._steps, *(Step.of(r) for r in intents)]

    def _enact(self, result: TickResult) -> EnactReport:
        return self.enactor.run(self._steps)


def _settle_of(config: HopsConfig) -> SettleOptions:
    return SettleOptions(timeout_s=config.requeue_wait_s, quiet_s=config.requeue_quiet_s)
