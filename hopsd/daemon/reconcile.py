"""Reconcile: bring the ledger in line with what Slurm reports, in one transaction.

Slurm is the truth about where jobs are; the ledger is hops's memory of what it
adopted, decided and measured. Each tick this module adopts newly submitted
hops-tagged held jobs (after checking their tags), records starts, ends,
failures and requeues, learns the final state of jobs that left the queue from
accounting, and advances wait time, attained service (raw GPU-seconds and
normalised by GPU-type speed), usage per owner, progress and measured throughput.

Slurm job ids are unique only within one incarnation of a cluster: a controller
started afresh (``slurmctld -c``) counts from 1 again, so a ledger kept across
that meets new jobs under old ids. A ledger row whose Slurm id now names a job
that cannot be the one it recorded (see :func:`reuse_reason`) is retired before
anything else is done with that id, in the same transaction: its Slurm id is
cleared, an unfinished row is ended as failed, its pending intents are
abandoned (they would act on the new job), and a warning is logged. The new
job is then adopted under a ledger id of its own (``<slurm id>-<n>``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from hopsd.config import HopsConfig
from hopsd.core import act
from hopsd.core.accounting import Clock, StatedRun, charge_split, clock_of
from hopsd.core.model import Configuration
from hopsd.daemon.adoption import (
    ADOPT_BATCH,
    REUSED,
    TAG_CHANGED,
    adopt_together,
    check_tag,
    entry_partitions,
    free_id,
    in_savepoint,
    job_id_of,
    outside_managed,
    reuse_reason,
)
from hopsd.daemon.holds import Holds, record_unplanned
from hopsd.daemon.progress_doubt import doubt_reported_progress
from hopsd.daemon.progress_learning import ProgressLearner
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.slurm_requeues import RunEnds, SlurmRequeues
from hopsd.daemon.snapshot_builder import ClusterView, observed_config
from hopsd.daemon.views import RUNNING, Observation, ObservedJob
from hopsd.ledger import runs
from hopsd.ledger.measurements import MeasurementStore
from hopsd.ledger.records import (
    TERMINAL_STATES,
    WAITING_STATES,
    AllocationReason,
    JobRecord,
    JobSpec,
    JobState,
    JobUpdate,
    is_legal,
)
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")

AccountingLookup = Callable[[Sequence[int]], Mapping[int, ObservedJob]]

_END_STATES = {"COMPLETED": JobState.DONE, "CANCELLED": JobState.CANCELLED}


@dataclass
class ReconcileReport:
    """What changed this tick; the tick logs it and feeds metrics from it."""

    adopted: list[str] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    ended: list[tuple[str, str]] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)

    def extend(self, later: ReconcileReport) -> None:
        """Add what a later reconciliation in the same tick changed."""
        for name in (f.name for f in dataclasses.fields(self)):
            getattr(self, name).extend(getattr(later, name))


@dataclass
class _Usage:
    gpu_s: float = 0.0
    gpu_s_norm: float = 0.0


#: Slurm states start and end times in whole seconds, cut down.
SLURM_TIME_RESOLUTION_S = 1.0


def _speed(view: ClusterView, config: Configuration) -> float:
    """The speed of the configuration's GPU type (1.0 for a type the cluster does not know)."""
    known = view.cluster.gpu_types.get(config.gpu_type)
    return known.speed if known is not None else 1.0


def _stated_run(
    seen: ObservedJob | None, view: ClusterView, where: Configuration | None
) -> StatedRun | None:
    """The run Slurm states for a running or ended job with a known start, on the GPUs
    ``where`` it ran (:func:`hopsd.core.accounting.charge_split`); None otherwise."""
    if seen is None or seen.start_time <= 0 or not (seen.state == RUNNING or seen.final):
        return None
    gpus, speed = (where.total_gpus, _speed(view, where)) if where else (0, 1.0)
    end = seen.end_time if seen.final and seen.end_time > 0 else None
    return StatedRun(seen.start_time, end, gpus, speed, resolution_s=SLURM_TIME_RESOLUTION_S)


def _ran_where(
    unit: Unit, row: JobRecord, seen: ObservedJob, view: ClusterView | None
) -> Configuration | None:
    """Where the job's run Slurm states was: as Slurm states it (``view``: the cluster to
    read it against; None: already read and not stated) or, for an ended job, whose GPUs
    per node Slurm no longer states, hops's last placement of the job when Slurm names
    exactly its nodes."""
    config = observed_config(seen, view.cluster) if view is not None else None
    if config is not None or not seen.final or not seen.ran_on:
        return config
    planned = unit.latest_targets([row.id]).get(row.id)
    if planned is None or set(planned.node_ids) != set(seen.ran_on):
        return None
    return planned


def _still_waiting(row: JobRecord, seen: ObservedJob) -> bool:
    """The job waited in the ledger and Slurm still has it pending: the tick only charges
    its wait (:meth:`Reconciler._follow` has nothing to move, nothing is learned)."""
    return JobState(row.state) in WAITING_STATES and seen.pending and not seen.final


class Reconciler:
    """Applies one observation to the ledger; keeps only log de-duplication in memory."""

    def __init__(
        self,
        config: HopsConfig,
        accounting: AccountingLookup,
        adopt_filter: Callable[[ObservedJob], bool] | None = None,
        sensing: Sensing | None = None,
        run_ends: RunEnds | None = None,
    ) -> None:
        self.config = config
        self.accounting = accounting
        self.adopt_filter = adopt_filter
        spool = Path(config.spool_dir) if config.spool_dir else None
        self.sensing = sensing if sensing is not None else Sensing(spool)
        self.problems = self.sensing.problems
        # Set by the tick when the profiling queue is on: new jobs are profiled first.
        self.profile_new_jobs = False
        # the record of unplanned starts, and the holds this daemon asked for
        self.holds = Holds()
        # Slurm ids with a refusal in the ledger (loaded on first use): a job is
        # refused, recorded and logged once, also across restarts of hopsd.
        self._refusals: set[int] | None = None
        self.learner = ProgressLearner(self.sensing)
        # requeues Slurm made itself (its preemption, a node failure): named from accounting
        self.slurm_requeues = SlurmRequeues(run_ends)

    def run(self, unit: Unit, obs: Observation, view: ClusterView, now: float) -> ReconcileReport:
        """Bring the ledger in step with what Slurm shows, in ``unit``'s transaction."""
        try:
            return self._run(unit, obs, view, now)
        except BaseException:
            self._refusals = None  # the transaction rolls back: reread what it really holds
            self.slurm_requeues.forget()
            raise

    def _run(self, unit: Unit, obs: Observation, view: ClusterView, now: float) -> ReconcileReport:
        report = ReconcileReport()
        self.sensing.note(obs.jobs)
        observed = obs.job_map()
        rows = {r.slurm_job_id: r for r in unit.active_records() if r.slurm_job_id is not None}
        for slurm_id, row in list(rows.items()):
            seen = observed.get(slurm_id)
            why = reuse_reason(row, seen) if seen is not None else ""
            if why:
                self._retire(unit, row, why, now, report)
                del rows[slurm_id]
        self._adopt(unit, obs, rows, view, now, report)
        # the rows this tick changes, loaded together (a waiting job's charge needs none)
        moved = [
            r.id for i, r in rows.items() if i in observed and not _still_waiting(r, observed[i])
        ]
        unit.jobs([*moved, *(r.id for i, r in rows.items() if i not in observed)])
        usage: dict[tuple[str, str], _Usage] = {}
        store = unit.store(now)
        gone: list[JobRecord] = []
        charges: list[JobUpdate] = []
        for slurm_id, row in rows.items():
            seen = observed.get(slurm_id)
            if seen is None:
                gone.append(row)
                continue
            if _still_waiting(row, seen):
                work = partial(self._one_waiting, unit, row, seen, view, now, charges)
            else:
                work = partial(self._one, unit, store, row, seen, view, now, report)
            self._isolated(unit, row, usage, work)
        unit.write_updates(charges)
        self.slurm_requeues.record(unit)
        self._finish_gone(unit, gone, view, now, usage, report)
        for (user, account), used in usage.items():
            if used.gpu_s > 0:
                unit.add_usage(user, account, now, used.gpu_s, used.gpu_s_norm)
        for row in rows.values():
            self._record_problem(unit, row)
        live = {j.slurm_id for j in obs.jobs if not j.final}
        self.sensing.clean(now, self.config.spool_retention_s, live)
        self.problems.retain(set(observed))
        self._forget_refusals(unit, {j.slurm_id for j in obs.jobs if not j.final})
        self.holds.asked &= {j.slurm_id for j in obs.jobs if j.pending}
        return report

    def _forget_refusals(self, unit: Unit, live: set[int]) -> None:
        """Drop the refusals of jobs that left Slurm (one query on the first tick, then none
        unless one did)."""
        refusals = self._refusal_ids(unit)
        gone = refusals - live
        if gone:
            unit.drop_refusals(gone)
            refusals -= gone

    def _refusal_ids(self, unit: Unit) -> set[int]:
        """The Slurm ids refused in the ledger, read once per process and kept in step."""
        if self._refusals is None:
            self._refusals = unit.refusal_ids()
        return self._refusals

    def _one(
        self,
        unit: Unit,
        store: MeasurementStore,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        now: float,
        report: ReconcileReport,
        usage: dict[tuple[str, str], _Usage],
    ) -> None:
        """One job's reconciliation: charge its interval, follow Slurm, learn from its reports."""
        row = self._advance(unit, row, view, now, usage, seen)
        if JobState(row.state) == JobState.PROFILING:
            self._follow_profiling(unit, row, seen, view, now, report)
        else:
            self._follow(unit, row, seen, view, now, report)
        self._keep_tag(unit, row, seen)
        self.learner.learn(store, unit.refresh(row), seen, view, now)
        doubt_reported_progress(unit, row, self.sensing, self.config)

    def _one_waiting(
        self,
        unit: Unit,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        now: float,
        charges: list[JobUpdate],
        usage: dict[tuple[str, str], _Usage],
    ) -> None:
        """:meth:`_one` for a job that waited and waits still (:func:`_still_waiting`): most
        of a large queue, every tick. There is nothing to follow nor learn; its charge is
        added to ``charges``, written with the others' in one statement, once the rest of
        its work has succeeded (a failure leaves its interval to the next tick, as in
        :meth:`_isolated`)."""
        charge = self._charge(row, view, now, usage)
        self._keep_tag(unit, row, seen)
        doubt_reported_progress(unit, row, self.sensing, self.config)
        charges.append(charge)

    def _keep_tag(self, unit: Unit, row: JobRecord, seen: ObservedJob) -> None:
        """A job keeps the tag it was adopted with; a comment edited since is reported to its
        owner (``hops status``) and otherwise ignored (:func:`adopted_tag`).

        A row adopted before the ledger kept tags records the valid tag Slurm shows now.
        """
        if not row.adopted_tag:
            if seen.tag is not None:
                unit.update_job(JobUpdate(row.id, adopted_tag=seen.comment))
            return
        if seen.comment != row.adopted_tag:
            self.problems.note(seen.slurm_id, TAG_CHANGED, "tag")

    def _isolated(
        self,
        unit: Unit,
        row: JobRecord,
        usage: dict[tuple[str, str], _Usage],
        work: Callable[[dict[tuple[str, str], _Usage]], None],
    ) -> None:
        """Run one job's work so that any exception costs only that job, for this tick.

        The job's usage is merged only when its work succeeds; on failure its
        row's unflushed changes are dropped (the next tick charges the whole
        interval again, from the row's unchanged ``updated_at``) and the
        failure is recorded for the job (:class:`~hopsd.daemon.problems.InputProblems`).
        """
        mine: dict[tuple[str, str], _Usage] = {}

        def run() -> bool:
            work(mine)
            return True

        if self.problems.guard(int(row.slurm_job_id or 0), "reconcile", run) is None:
            unit.discard(row.id)
            return
        for owner, used in mine.items():
            total = usage.setdefault(owner, _Usage())
            total.gpu_s += used.gpu_s
            total.gpu_s_norm += used.gpu_s_norm

    def _record_problem(self, unit: Unit, row: JobRecord) -> None:
        """Write the job's latest refused input or contained failure where its owner sees it."""
        problem = self.problems.take(int(row.slurm_job_id or 0))
        if problem is not None and row.input_problem != problem:
            unit.update_job(JobUpdate(row.id, input_problem=problem))

    # -- adoption ----------------------------------------------------------------------

    def _adopt(
        self,
        unit: Unit,
        obs: Observation,
        rows: Mapping[int, JobRecord],
        view: ClusterView,
        now: float,
        report: ReconcileReport,
    ) -> None:
        candidates = [j for j in obs.jobs if j.claims_hops and j.slurm_id not in rows]
        if self.adopt_filter is not None:
            candidates = [j for j in candidates if self.adopt_filter(j)]
        if not candidates:
            return
        ids = [j.slurm_id for j in candidates]
        known = unit.jobs_by_slurm_ids(ids)
        # ledger ids already taken, read at once rather than one query per job
        taken = set(unit.jobs([job_id_of(i) for i in ids]))
        entry = entry_partitions(obs.nodes, view.partition_of)
        limits = (view.largest_config(), view.per_type(), entry)
        adopt = partial(self._adopt_one, unit, limits=limits, taken=taken, now=now, report=report)
        fresh = [j for j in candidates if j.slurm_id not in known]
        alone = [j for j in candidates if j.slurm_id in known]
        for start in range(0, len(fresh), ADOPT_BATCH):
            chunk = fresh[start : start + ADOPT_BATCH]
            lists = [getattr(report, f.name) for f in dataclasses.fields(report)]
            inserts: list[JobSpec] = []  # the chunk's new rows, written in one statement
            batch = partial(adopt, inserts=inserts)
            written = partial(unit.add_jobs, inserts, now)
            if not adopt_together(unit, chunk, batch, lists, self.problems, written):
                self._refusals = None  # reread: the savepoint's refusals are gone
                alone += chunk  # one of them failed: each on its own, to contain it
        for job in alone:
            work = partial(adopt, job, known.get(job.slurm_id))
            self.problems.guard(job.slurm_id, "adoption", partial(in_savepoint, unit, work))

    def _adopt_one(
        self,
        unit: Unit,
        job: ObservedJob,
        old: JobRecord | None,
        *,
        limits: tuple[int, Mapping[str, int], frozenset[str]],
        taken: set[str],
        now: float,
        report: ReconcileReport,
        inserts: list[JobSpec] | None = None,
    ) -> None:
        """Adopt one tagged held job, or refuse it with the reason (``limits``: the largest
        configuration, GPUs per type, the partitions hops jobs may be submitted to).

        With ``inserts``, a job adopted as it is (pending, not sent to profiling) is put
        there for the caller to write with the rest of its batch, in the same savepoint.
        """
        if old is not None:
            why = reuse_reason(old, job)
            if not why:
                return  # adopted before (and finished): never adopted twice
            self._retire(unit, old, why, now, report)
        if job.final:
            return
        if elsewhere := outside_managed(job, limits[2]):  # a partition hops does not manage
            self._refuse(unit, job, elsewhere, now, report)
            return
        if not (job.pending or job.state == RUNNING):
            self._refuse(unit, job, "tagged but not submitted held; left to Slurm", now, report)
            return
        spec, reason = check_tag(job, limits[0], self.config.max_demand_gpus, limits[1])
        if spec is None:
            self._refuse(unit, job, reason, now, report)
            return
        spec = replace(spec, id=free_id(unit, job.slurm_id, taken))
        unplanned = job.state == RUNNING
        no_preempt = job.tag is not None and job.tag.no_preempt
        profiled = self.profile_new_jobs and not (no_preempt or unplanned)
        if inserts is not None and not (unplanned or profiled):
            inserts.append(spec)
        else:
            unit.add_job(spec, now, free=True)
        if unplanned:
            record_unplanned(unit, spec.id, job, now)
        refusals = self._refusal_ids(unit)
        if job.slurm_id in refusals:
            unit.drop_refusals([job.slurm_id])  # refused once, adopted now (the config changed)
            refusals.discard(job.slurm_id)
        if profiled:
            unit.transition(spec.id, JobState.PROFILING, now, "profiling on each GPU type")
        report.adopted.append(spec.id)
        log.info(
            "event=adopt job=%s user=%s demands=%s samples=%g",
            spec.id,
            spec.user,
            ",".join(map(str, spec.demands)),
            spec.total_samples,
        )

    def _retire(
        self, unit: Unit, row: JobRecord, why: str, now: float, report: ReconcileReport
    ) -> None:
        """Detach a row from a Slurm id a later cluster incarnation gave to another job."""
        slurm_id = int(row.slurm_job_id or 0)
        log.warning(
            "event=slurm-id-reused slurm_job=%s retired_job=%s state=%s reason=%r "
            "note='the ledger row is from an earlier cluster incarnation; it is retired'",
            slurm_id,
            row.id,
            row.state,
            why,
        )
        for intent in unit.pending_intents(row.id):
            unit.mark_abandoned(intent.id, REUSED, now)
        if JobState(row.state) in TERMINAL_STATES:
            said = f"{row.state_reason}; {REUSED}" if row.state_reason else REUSED
            unit.update_job(JobUpdate(row.id, state_reason=said))
        else:
            unit.close_run(row.id, now, REUSED)
            unit.transition(row.id, JobState.FAILED, now, REUSED)
            unit.record_allocation(None, row.id, AllocationReason.END, None, now)
            report.ended.append((row.id, JobState.FAILED.value))
        self.learner.forget(row.id, slurm_id)
        if self._refusals is not None:
            self._refusals.discard(slurm_id)
        unit.detach_slurm_id(row.id)  # frees the unique Slurm id before the new job takes it
        report.retired.append(row.id)

    def _refuse(
        self, unit: Unit, job: ObservedJob, reason: str, now: float, report: ReconcileReport
    ) -> None:
        """Log a refusal once and keep it in the ledger, where ``hops status`` shows it."""
        refusals = self._refusal_ids(unit)
        if job.slurm_id in refusals:
            return
        refusals.add(job.slurm_id)
        unit.record_refusal(job.slurm_id, job.user, reason[:500], now)
        report.rejected.append((job.slurm_id, reason))
        log.warning("event=refuse slurm_job=%s user=%s reason=%r", job.slurm_id, job.user, reason)

    # -- per-job progress ----------------------------------------------------------------

    def _advance(
        self,
        unit: Unit,
        row: JobRecord,
        view: ClusterView,
        now: float,
        usage: dict[tuple[str, str], _Usage],
        seen: ObservedJob | None = None,
    ) -> JobRecord:
        """Charge the interval since the row was last updated to the state it was in, split
        where Slurm states a run's start or end inside it (:mod:`hopsd.core.accounting`,
        the simulator's rule too)."""
        # the stated run's GPUs count only for a row that holds no placement (its wait may
        # end inside the interval); a placed row is charged on its own GPUs
        where = _ran_where(unit, row, seen, view) if seen and row.current is None else None
        unit.update_job(self._charge(row, view, now, usage, _stated_run(seen, view, where)))
        return unit.refresh(row)

    @staticmethod
    def _charge(
        row: JobRecord,
        view: ClusterView,
        now: float,
        usage: dict[tuple[str, str], _Usage],
        run: StatedRun | None = None,
    ) -> JobUpdate:
        """The row's counters once the interval since its last update is charged (split at
        ``run``'s stated start and end), and its owner's usage in ``usage``."""
        since = min(row.updated_at or now, now)
        config = row.current
        clock = clock_of(str(row.state), config is not None)
        gpus, speed = 0, 1.0
        if clock is Clock.ON_GPUS and config is not None:
            gpus, speed = config.total_gpus, _speed(view, config)
        cost = charge_split(clock, since, now, gpus, speed, run)
        served = bool(gpus or cost.service_gpu_s)
        charged = JobUpdate(
            row.id,
            updated_at=now,
            wait_time=row.wait_time + cost.wait_s if cost.wait_s else None,
            service_gpu_s=row.service_gpu_s + cost.service_gpu_s if served else None,
            service_norm=row.service_norm + cost.service_norm if served else None,
        )
        if served:
            owner = usage.setdefault((row.user, row.account), _Usage())
            owner.gpu_s += cost.service_gpu_s
            owner.gpu_s_norm += cost.service_norm
        return charged

    def _follow(
        self,
        unit: Unit,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        now: float,
        report: ReconcileReport,
    ) -> None:
        """Move the row along the state machine to match Slurm."""
        state = JobState(row.state)
        if seen.state == RUNNING:
            config = observed_config(seen, view.cluster)
            new_run = seen.restarts != (row.restarts or 0)
            if state != JobState.RUNNING or new_run or (config is not None and row.current is None):
                unit.open_run(row.id, seen.restarts, runs.RUN, config, seen.start_time or now)
            if state != JobState.RUNNING:
                if config is not None and unit.note_observed_start(row.id, config, now):
                    log.warning(
                        "event=started-elsewhere job=%s nodes=%s note='not where its last "
                        "placement said; recorded where it runs'",
                        row.id,
                        ",".join(seen.nodes),
                    )
                unit.transition(row.id, JobState.RUNNING, now, f"running on {','.join(seen.nodes)}")
                report.started.append(row.id)
                log.info(
                    "event=started job=%s nodes=%s restarts=%d",
                    row.id,
                    ",".join(f"{n}:{g}" for n, g in seen.nodes.items()),
                    seen.restarts,
                )
            if config is not None:
                unit.set_placement(row.id, config)
            # Slurm counts requeues; it is the truth
            unit.update_job(JobUpdate(row.id, restarts=seen.restarts))
        elif seen.pending and state == JobState.RUNNING:
            target = JobState.PREEMPTED if seen.held else JobState.REQUEUED
            # why hops requeued it (a move, a preemption, ...), else Slurm's word
            why = unit.close_requeued_run(row.id, now, row.restarts or 0)
            if why is None:
                self.slurm_requeues.note(row.id, seen.slurm_id)
            unit.transition(row.id, target, now, why or seen.reason or "requeued")
            unit.set_placement(row.id, None)
            # what the run said after the last tick: had it done all its samples
            # before the requeue reached it, the requeue hit a finished run, and
            # enacting the rest of the move must know (hopsd.daemon.enact)
            last = self.learner.final_samples(row)
            if last is not None and last > row.samples_done:
                unit.update_job(JobUpdate(row.id, samples_done=last))
            # Slurm counts requeues; it is the truth
            unit.update_job(JobUpdate(row.id, restarts=seen.restarts))
            report.requeued.append(row.id)
        elif seen.final:
            if act.launch_failed(seen.state, seen.start_time, seen.end_time):
                return  # the step relaunches it, or :meth:`end` (hopsd.daemon.relaunch)
            self._end(unit, row, seen, now, report, observed_config(seen, view.cluster))

    def ender(
        self, unit: Unit, view: ClusterView, now: float, report: ReconcileReport
    ) -> Callable[[JobRecord, ObservedJob], None]:
        """What records the end reconcile defers (a failed launch's, once the act stage has
        not relaunched it), as :meth:`_follow` records any other: given the row and the job."""
        return lambda row, seen: self._end(
            unit, row, seen, now, report, observed_config(seen, view.cluster)
        )

    def _follow_profiling(
        self,
        unit: Unit,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        now: float,
        report: ReconcileReport,
    ) -> None:
        """A job in its profiling runs: follow where it is; the profiling queue moves it on."""
        if seen.final:
            self._end(unit, row, seen, now, report, observed_config(seen, view.cluster))
            return
        config = observed_config(seen, view.cluster) if seen.state == RUNNING else None
        if seen.state == RUNNING and row.current is None:
            unit.open_run(row.id, seen.restarts, runs.PROFILING, config, seen.start_time or now)
        elif seen.pending and row.current is not None:
            unit.close_requeued_run(row.id, now, row.restarts or 0)
        unit.set_placement(row.id, config)
        unit.update_job(JobUpdate(row.id, restarts=seen.restarts))

    def _end(
        self,
        unit: Unit,
        row: JobRecord,
        seen: ObservedJob,
        now: float,
        report: ReconcileReport,
        where: Configuration | None = None,
    ) -> None:
        """Record the job's end as Slurm states it, with its last run (``where`` it ran,
        when Slurm still names its nodes)."""
        row = unit.refresh(row)
        where = where or _ran_where(unit, row, seen, None)
        target = _END_STATES.get(seen.state, JobState.FAILED)
        ended_at = seen.end_time or now
        last = self.learner.final_samples(row)
        if last is not None:
            unit.update_job(JobUpdate(row.id, samples_done=max(row.samples_done, last)))
        restarts = max(row.restarts or 0, seen.restarts)
        kind = runs.PROFILING if JobState(row.state) == JobState.PROFILING else runs.RUN
        if not is_legal(JobState(row.state), target):
            # it started and ended between two ticks: record the run it had
            unit.transition(
                row.id, JobState.RUNNING, seen.start_time or ended_at, "ran between ticks"
            )
        if seen.start_time:
            unit.open_run(row.id, seen.restarts, kind, where, seen.start_time)
        unit.close_run(row.id, ended_at, runs.ended_by_slurm(seen.state), seen.exit_code)
        unit.transition(row.id, target, ended_at, f"slurm {seen.state}")
        unit.update_job(JobUpdate(row.id, restarts=restarts))
        unit.record_allocation(None, row.id, AllocationReason.END, None, ended_at)
        self._record_problem(unit, row)
        self.sensing.ended(int(row.slurm_job_id or 0), row.user, now)
        self.learner.forget(row.id, int(row.slurm_job_id or 0))
        report.ended.append((row.id, target.value))
        log.info("event=ended job=%s state=%s slurm_state=%s", row.id, target.value, seen.state)

    def _finish_gone(
        self,
        unit: Unit,
        gone: Sequence[JobRecord],
        view: ClusterView,
        now: float,
        usage: dict[tuple[str, str], _Usage],
        report: ReconcileReport,
    ) -> None:
        if not gone:
            return
        records = self.accounting([int(r.slurm_job_id or 0) for r in gone])
        for row in gone:
            record = records.get(int(row.slurm_job_id or 0))
            work = partial(self._finish_one, unit, row, record, view, now, report)
            self._isolated(unit, row, usage, work)

    def _finish_one(
        self,
        unit: Unit,
        row: JobRecord,
        record: ObservedJob | None,
        view: ClusterView,
        now: float,
        report: ReconcileReport,
        usage: dict[tuple[str, str], _Usage],
    ) -> None:
        """End one job that left the queue, from accounting or, failing that, its progress."""
        row = self._advance(unit, row, view, now, usage, record)
        if record is not None and record.final:
            self._end(unit, row, record, now, report, observed_config(record, view.cluster))
            return
        samples = self.learner.final_samples(row)
        done = samples is not None and samples >= row.total_samples
        state = "COMPLETED" if done else "FAILED"
        reason = "left the queue without an accounting record"
        log.warning("event=gone job=%s assumed=%s reason=%r", row.id, state, reason)
        self._end(
            unit,
            row,
            ObservedJob(int(row.slurm_job_id or 0), row.user, row.account, state, end_time=now),
            now,
            report,
        )
