"""The profiling queue on Slurm: observe profiling jobs, enact what the core decides.

The rules (which job is profiled where, when a run stops, when a job's
profiling is over) are the core's, :mod:`hopsd.core.profiling`, taken inside
the scheduling step exactly as the simulator takes them. This module only
tells the step what it sees and enacts the answer.

How a run is enacted on Slurm (22.05 cannot change a pending job's environment,
and a job cannot run on two partitions at once): the profiling run *is* the
job itself. hopsd writes ``<spool>/<job>.mode`` (``{"mode": "profile",
"iterations": N, "run": R}``, R = the restart count the run will have; the
spool is hops.conf ``daemon.spool_dir`` or else the job's working directory,
written only when that directory belongs to the job's user, see
:mod:`hopsd.daemon.spool` -- a job whose mode file cannot be written safely is
not profiled, and the reason is logged), places the held job on one GPU of a
type and releases it. The job's probe reads the file, times N iterations,
appends a ``profile`` record and goes on training; hopsd stores the profile,
gives the job the checkpoint notice a move gets (signal, then requeue once it
checkpointed or the grace is over; a job that never reported is requeued at
once, nothing would hear the signal), requeue-holds it, and places it on the
next type. When profiling is over, the mode file is removed, types the job
was not profiled on get its profile scaled by the admin's relative type speeds
(GPU phases scale, data time does not, stored with ``iterations = 0`` so they
are known to be derived), and the job joins the waiting queue; its wait so
far counts, as for any queued job.

What the core is told survives a daemon restart: runs placed so far are the
job's ``start`` allocations in the ledger and profiles are ledger rows, so a
job whose run gave no report is never started for profiling again (only the
start time of a run in flight and skipped types live in memory).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from hopsd.config import HopsConfig
from hopsd.core.model import Cluster, Configuration
from hopsd.core.profiling import (
    KnownProfile,
    Profilee,
    ProfilingDecision,
    ProfilingRules,
    RunInFlight,
    derived_profiles,
)
from hopsd.core.throughput import PhaseProfile
from hopsd.daemon.decide import HOLD, PREEMPT, PROFILE, Action, JobHandle
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.snapshot_builder import (
    ClusterView,
    adopted_tag,
    observed_config,
    with_tag_rules,
)
from hopsd.daemon.views import RUNNING, Observation, ObservedJob
from hopsd.ledger.records import AllocationReason, JobRecord, JobState, core_job
from hopsd.ledger.unit import Unit
from hopsd.slurm.tag import UNKNOWN_MODEL

log = logging.getLogger("hopsd.profiling")


@dataclass(frozen=True)
class ProfilingOptions:
    """Whether new jobs are profiled, for how many iterations, how long to wait for it."""

    enabled: bool = False
    iterations: int = 20
    timeout_s: float = 60.0

    @property
    def rules(self) -> ProfilingRules:
        """The core's profiling rules these options give."""
        return ProfilingRules(self.enabled, self.timeout_s)

    @staticmethod
    def of(config: HopsConfig, shadow: bool = False) -> ProfilingOptions:
        """Profiling needs a daemon that enacts (not shadow); mode files go to each job's spool."""
        enabled = config.profiling and not shadow
        return ProfilingOptions(enabled, config.profiling_iterations, config.profiling_timeout_s)


def names_a_model(name: str) -> bool:
    """Whether a job told hops its model (``hops submit --model``; the default names none)."""
    return bool(name) and name != UNKNOWN_MODEL


def mode_body(iterations: int, run: int) -> dict[str, object]:
    """What the probe reads from ``<spool>/<job>.mode`` (see :func:`hops_probe.resolve_mode`)."""
    return {"mode": "profile", "iterations": iterations, "run": run}


@dataclass
class Attempt:
    """A profiling run placed by hopsd: where, and since when (for the timeout)."""

    gpu_type: str
    node: str
    since: float


@dataclass
class Enacted:
    """What hopsd does for the profiling queue this tick: Slurm actions, and why."""

    actions: list[Action] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    handles: dict[str, JobHandle] = field(default_factory=dict)
    #: stopped runs that never reported anything: no probe would hear a checkpoint notice
    unheard: set[str] = field(default_factory=set)


class Profiler:
    """Tells the step which jobs are profiling and how far; enacts what it decides.

    Remembers between ticks only when each run was placed (for the core's
    timeout) and the types whose run never started.
    """

    def __init__(self, options: ProfilingOptions, sensing: Sensing) -> None:
        self.options = options
        self.sensing = sensing
        self._attempts: dict[str, Attempt] = {}
        self._skipped: dict[str, set[str]] = {}

    # -- what the step is told -----------------------------------------------------------

    def profilees(
        self,
        unit: Unit,
        rows: Sequence[JobRecord],
        obs: Observation,
        view: ClusterView,
        now: float,
        waiting: frozenset[str] = frozenset(),
    ) -> tuple[Profilee, ...]:
        """The jobs in their profiling phase that Slurm shows held, released or running.

        A job whose stop still waits (its checkpoint notice's grace) is left to that
        chain: deciding for it again would stop it twice.
        """
        profiling = [r for r in rows if r.state == JobState.PROFILING]
        self._prune({r.id for r in profiling})
        profiling = [r for r in profiling if r.id not in waiting]
        if not profiling:
            return ()
        ids = [r.id for r in profiling]
        done = unit.profiled_types(ids)
        runs = unit.start_counts(ids)
        targets = unit.latest_targets(ids)
        known = self._known(unit, profiling)
        observed = obs.job_map()
        out: list[Profilee] = []
        for row in profiling:
            seen = observed.get(int(row.slurm_job_id or -1))
            if seen is None or seen.final:
                continue
            run = self._run_of(row, seen, view.cluster, targets.get(row.id), now)
            if run is None and not (seen.pending and seen.held):
                continue  # starting or completing: its GPUs are out of the capacity anyway
            job = self.sensing.problems.guard(seen.slurm_id, "planning", partial(core_job, row))
            tag = adopted_tag(row, seen)
            job = None if job is None else with_tag_rules(job, tag, view.cluster)
            out.append(
                Profilee(
                    row.id,
                    row.submit_time,
                    row.state_changed_at,
                    frozenset(done[row.id]),
                    frozenset(self._skipped.get(row.id, set())),
                    run,
                    runs[row.id],
                    job,
                    known.get(row.id, ()),
                )
            )
        return tuple(out)

    @staticmethod
    def _known(unit: Unit, rows: Sequence[JobRecord]) -> dict[str, tuple[KnownProfile, ...]]:
        """Per job naming its model: the newest profile per type that other jobs of the
        same model and per-GPU batch size measured (the core then skips those types)."""
        keys = {r.id: (r.model_name, r.batch_size) for r in rows if names_a_model(r.model_name)}
        found = unit.model_profiles(sorted(set(keys.values())))
        out: dict[str, tuple[KnownProfile, ...]] = {}
        for job_id, key in keys.items():
            newest: dict[str, KnownProfile] = {}
            for other, gpu_type, profile in found.get(key, []):
                if other != job_id and gpu_type not in newest:
                    newest[gpu_type] = KnownProfile(gpu_type, profile)
            out[job_id] = tuple(newest[t] for t in sorted(newest))
        return out

    def _run_of(
        self,
        row: JobRecord,
        seen: ObservedJob,
        cluster: Cluster,
        target: Configuration | None,
        now: float,
    ) -> RunInFlight | None:
        """The run in flight as Slurm shows it (None while the job is held).

        A released run hopsd has no memory of (it restarted) is where the
        ledger's last start put it, timed from now.
        """
        attempt = self._attempts.get(row.id)
        if attempt is None and seen.pending and not seen.held and target is not None:
            attempt = Attempt(target.gpu_type, target.node_ids[0], now)
            self._attempts[row.id] = attempt
        if seen.busy:
            config = observed_config(seen, cluster)
            if config is None or seen.state != RUNNING:
                return None
            if attempt is None or attempt.gpu_type != config.gpu_type:
                attempt = Attempt(config.gpu_type, config.node_ids[0], now)
                self._attempts[row.id] = attempt
            return RunInFlight(attempt.gpu_type, attempt.node, attempt.since, True)
        if seen.pending and not seen.held and attempt is not None:
            return RunInFlight(attempt.gpu_type, attempt.node, attempt.since, False)
        return None

    # -- enacting the core's decision -------------------------------------------------

    def enact(
        self,
        unit: Unit,
        decision: ProfilingDecision,
        rows: Sequence[JobRecord],
        obs: Observation,
        view: ClusterView,
        config: HopsConfig,
        now: float,
    ) -> Enacted:
        """Turn the decision into Slurm actions and ledger changes (one job's failure
        skips only that job)."""
        out = Enacted(reasons=dict(decision.reasons))
        by_id = {r.id: r for r in rows}
        observed = obs.job_map()

        def each(
            pairs: Sequence[tuple[str, str]], do: Callable[[JobRecord, ObservedJob, str], None]
        ) -> None:
            for job_id, why in pairs:
                row = by_id.get(job_id)
                seen = observed.get(int(row.slurm_job_id or -1)) if row is not None else None
                if row is not None and seen is not None:
                    self.sensing.problems.guard(
                        seen.slurm_id, "profiling", partial(do, row, seen, why)
                    )

        def stop(row: JobRecord, seen: ObservedJob, why: str) -> None:
            self._attempts.pop(row.id, None)
            requeue = Action(row.id, seen.slurm_id, PREEMPT, None, "", seen.restarts, True)
            out.actions.append(requeue)
            out.reasons[row.id] = f"profiling: {why}"
            heard = self.uses_probe(row, seen)
            if not heard:
                out.unheard.add(row.id)
            log.info(
                "event=profile-stop job=%s reason=%r notice=%s",
                row.id,
                why,
                "yes" if heard else "no (the job never reported: no probe would hear it)",
            )

        def hold(row: JobRecord, seen: ObservedJob, why: str) -> None:
            attempt = self._attempts.pop(row.id, None)
            if attempt is not None:
                self._skipped.setdefault(row.id, set()).add(attempt.gpu_type)
            out.actions.append(Action(row.id, seen.slurm_id, HOLD, None, "", seen.restarts, True))
            out.reasons[row.id] = why

        def finish(row: JobRecord, seen: ObservedJob, why: str) -> None:
            self._finish(unit, row, view, config, now, why)
            out.finished.append(row.id)
            out.handles[row.id] = JobHandle(seen.slurm_id, seen.restarts, False)

        each(decision.stop, stop)
        each(decision.hold, hold)
        each(decision.finish, finish)
        for run in decision.start:
            row = by_id.get(run.job_id)
            seen = observed.get(int(row.slurm_job_id or -1)) if row is not None else None
            if row is None or seen is None:
                continue
            start = partial(self._start, unit, row, seen, view, config, run.node, out, now)
            self.sensing.problems.guard(seen.slurm_id, "profiling", start)
        return out

    def uses_probe(self, row: JobRecord, seen: ObservedJob) -> bool:
        """Whether the job's probe ever spoke: a report read, progress, or a report file.

        A job that never reported anything does not use the probe (or the probe
        cannot reach hopsd): a checkpoint notice would go unheard, so stopping
        its profiling run waits for nothing. The report file outlives a daemon
        restart, so the answer does too.
        """
        return (
            row.id in self.sensing.reported
            or row.samples_done > 0
            or self.sensing.has_report_file(seen.slurm_id)
        )

    def _start(
        self,
        unit: Unit,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        config: HopsConfig,
        node: str,
        out: Enacted,
        now: float,
    ) -> None:
        """Write the job's mode file, record the start and release it onto one GPU of ``node``."""
        gpu_type = view.cluster.node(node).gpu_type
        problem = self.sensing.write_mode(
            seen.slurm_id, row.user, mode_body(self.options.iterations, seen.restarts)
        )
        if problem:
            log.warning("event=profile-skipped job=%s reason=%r", row.id, problem)
            self._finish(unit, row, view, config, now, f"skipped, no mode file: {problem}")
            out.finished.append(row.id)
            return
        placement = Configuration(gpu_type, ((node, 1),))
        self._attempts[row.id] = Attempt(gpu_type, node, now)
        out.actions.append(
            Action(
                row.id,
                seen.slurm_id,
                PROFILE,
                placement,
                view.partition_of[node],
                seen.restarts,
                seen.restarts > 0,
                seen.cpus_per_gpu,
            )
        )
        out.reasons[row.id] = f"profiling on {gpu_type} ({node}) at {now:.3f}"
        unit.record_allocation(None, row.id, AllocationReason.START, placement, now)
        log.info("event=profile-start job=%s gpu_type=%s node=%s", row.id, gpu_type, node)

    def _finish(
        self,
        unit: Unit,
        row: JobRecord,
        view: ClusterView,
        config: HopsConfig,
        now: float,
        reason: str,
    ) -> None:
        done = unit.profiled_types([row.id])[row.id]
        self.sensing.remove_mode(int(row.slurm_job_id or 0))
        self._derive(unit, row, view.cluster, frozenset(done), now)
        # its last profiling run ended with the requeue that stopped it (none: never ran)
        unit.close_requeued_run(row.id, now)
        unit.transition(row.id, JobState.QUEUED, now, f"profiling over: {reason}")
        self._attempts.pop(row.id, None)
        log.info("event=profile-done job=%s types=%s reason=%r", row.id, sorted(done), reason)

    @staticmethod
    def _derive(
        unit: Unit, row: JobRecord, cluster: Cluster, done: frozenset[str], now: float
    ) -> None:
        """Profiles for the managed types the job was not profiled on (the core's rule:
        its model's known ones, else scaled from a measured one), stored as derived."""
        own: dict[str, PhaseProfile] = {}
        for gpu_type in sorted(done):
            found = unit.profile(row.id, gpu_type)
            if found is not None:
                own[gpu_type] = found[0]
        known = Profiler._known(unit, [row]).get(row.id, ())
        store = unit.store(now)
        for gpu_type, profile in derived_profiles(cluster, own, known).items():
            if unit.profile(row.id, gpu_type) is None:
                store.set_profile(row.id, gpu_type, profile, 0)

    def _prune(self, live: set[str]) -> None:
        for table in (self._attempts, self._skipped):
            for job_id in [j for j in table if j not in live]:
                del table[job_id]
