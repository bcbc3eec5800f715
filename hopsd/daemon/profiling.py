"""The profiling queue: a new job's short runs on each GPU type, before it queues.

How it is enacted on Slurm (22.05 cannot change a pending job's environment,
and a job cannot run on two partitions at once): the profiling run *is* the
job itself. hopsd writes ``<spool>/<job>.mode`` (``{"mode": "profile",
"iterations": N, "run": R}``, R = the restart count the run will have; the
spool is hops.conf ``daemon.spool_dir`` or else the job's working directory,
written only when that directory belongs to the job's user, see
:mod:`hopsd.daemon.spool` -- a job whose mode file cannot be written safely is
not profiled, and the reason is logged), places
the held job on one GPU of a type and releases it. The job's probe reads the
file, times N iterations, appends a ``profile`` record and goes on training;
hopsd stores the profile, requeue-holds the job, and places it on the next type.
Different jobs are profiled on different types at the same time, so the
cluster profiles in parallel while each job visits the types in turn. When
every type is done (or skipped), the mode file is removed and the job joins
the waiting queue; its wait so far counts, as for any queued job.

Robustness:

* a run that reports no profile within ``profiling_timeout_s`` (or that Slurm
  does not start in time) is requeued or held, and that type is skipped;
* a job that never wrote a single report in its first attempt has no probe:
  its profiling ends at once and it is estimated from progress or the table;
* the whole phase ends after ``timeout * (types + 1)`` seconds whatever happens;
* a type without a free GPU right now is not waited for once the job has one
  profile: types the job was not profiled on get that profile scaled by the
  admin's relative type speeds (GPU phases scale, data time does not), stored
  with ``iterations = 0`` so they are known to be derived.

Profiling is served on every tick (it takes idle GPUs before the planner sees
them), not only at round boundaries: it is short, and a new job should not
wait a whole round to be profiled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from hopsd.config import HopsConfig
from hopsd.core.fitting import scaled_profile
from hopsd.core.model import Cluster, Configuration
from hopsd.core.snapshot import Snapshot
from hopsd.daemon.decide import HOLD, PREEMPT, PROFILE, Action
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.snapshot_builder import ClusterView, build_cluster_view, observed_config
from hopsd.daemon.views import RUNNING, Observation, ObservedJob
from hopsd.ledger.records import AllocationReason, JobRecord, JobState
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.profiling")


@dataclass(frozen=True)
class ProfilingOptions:
    """Whether new jobs are profiled, for how many iterations, how long to wait for it."""

    enabled: bool = False
    iterations: int = 20
    timeout_s: float = 60.0

    @staticmethod
    def of(config: HopsConfig, shadow: bool = False) -> ProfilingOptions:
        """Profiling needs a daemon that enacts (not shadow); mode files go to each job's spool."""
        enabled = config.profiling and not shadow
        return ProfilingOptions(enabled, config.profiling_iterations, config.profiling_timeout_s)


@dataclass
class Attempt:
    """A profiling run in flight: where, and since when (for the timeout)."""

    gpu_type: str
    node: str
    since: float


@dataclass
class ProfilingStep:
    """What the profiling queue decided this tick."""

    actions: list[Action] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)

    def reserve(self, node: str) -> None:
        self.reserved[node] = self.reserved.get(node, 0) + 1


def mode_body(iterations: int, run: int) -> dict[str, object]:
    """What the probe reads from ``<spool>/<job>.mode`` (see :func:`hopsd.probe.resolve_mode`)."""
    return {"mode": "profile", "iterations": iterations, "run": run}


def free_gpus(snapshot: Snapshot) -> dict[str, int]:
    """GPUs per node no job the planner knows holds (profiling runs are already excluded)."""
    used: dict[str, int] = {}
    for job in snapshot.jobs:
        if job.current is not None:
            for node, gpus in job.current.parts:
                used[node] = used.get(node, 0) + gpus
    return {
        n.id: max(snapshot.capacity_of(n.id) - used.get(n.id, 0), 0) for n in snapshot.cluster.nodes
    }


def managed_types(cluster: Cluster) -> list[str]:
    return sorted({n.gpu_type for n in cluster.nodes if n.gpus > 0})


class Profiler:
    """The profiling queue; remembers attempts and skipped types between ticks."""

    def __init__(self, options: ProfilingOptions, sensing: Sensing) -> None:
        self.options = options
        self.sensing = sensing
        self._attempts: dict[str, Attempt] = {}
        self._failed: dict[str, set[str]] = {}
        self._no_probe: set[str] = set()
        self._unsafe: dict[str, str] = {}

    # -- before the snapshot: jobs whose profiling is over --------------------------------

    def finish_ready(
        self,
        unit: Unit,
        rows: Sequence[JobRecord],
        obs: Observation,
        config: HopsConfig,
        now: float,
    ) -> list[str]:
        """Move held profiling jobs with nothing left to profile to the waiting queue."""
        profiling = [r for r in rows if r.state == JobState.PROFILING]
        if not profiling:
            return []
        view = build_cluster_view(obs.nodes, config, {})
        types = managed_types(view.cluster)
        done = unit.profiled_types([r.id for r in profiling])
        observed = obs.job_map()
        finished = []
        for row in profiling:
            seen = observed.get(int(row.slurm_job_id or -1))
            if seen is None or not (seen.pending and seen.held):
                continue

            def one(row: JobRecord = row) -> None:
                remaining = self._remaining(row.id, types, done[row.id])
                deadline = row.state_changed_at + self.options.timeout_s * (len(types) + 1)
                reason = ""
                if not remaining:
                    reason = "profiled on every type it could be"
                elif row.id in self._no_probe:
                    reason = "no probe reports: estimated from progress or the table"
                elif now > deadline:
                    reason = "profiling deadline passed"
                if reason:
                    self._finish(unit, row, view, done[row.id], config, now, reason)
                    finished.append(row.id)

            self.sensing.problems.guard(int(row.slurm_job_id or 0), "profiling", one)
        return finished

    # -- after the snapshot: start, stop and hold profiling runs --------------------------

    def step(
        self,
        unit: Unit,
        rows: Sequence[JobRecord],
        obs: Observation,
        snapshot: Snapshot,
        view: ClusterView,
        config: HopsConfig,
        now: float,
    ) -> ProfilingStep:
        step = ProfilingStep()
        profiling = sorted(
            (r for r in rows if r.state == JobState.PROFILING), key=lambda r: (r.submit_time, r.id)
        )
        self._prune({r.id for r in profiling})
        if not profiling:
            return step
        types = managed_types(snapshot.cluster)
        done = unit.profiled_types([r.id for r in profiling])
        free = free_gpus(snapshot)
        observed = obs.job_map()
        for row in profiling:
            seen = observed.get(int(row.slurm_job_id or -1))
            if seen is None or seen.final:
                continue
            work = partial(
                self._step_one, unit, row, seen, view, config, types, done, free, step, now
            )
            self.sensing.problems.guard(seen.slurm_id, "profiling", work)
        return step

    def _step_one(
        self,
        unit: Unit,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        config: HopsConfig,
        types: Sequence[str],
        done: Mapping[str, set[str]],
        free: dict[str, int],
        step: ProfilingStep,
        now: float,
    ) -> None:
        """One profiling job's move this tick (isolated: its failure skips only this job)."""
        if seen.busy:
            self._running(row, seen, view.cluster, done[row.id], step, now)
        elif seen.pending and not seen.held:
            self._released(row, seen, step, now)
        elif seen.pending and seen.held:
            placed = self._place(unit, row, seen, view, types, done[row.id], free, step, now)
            unsafe = self._unsafe.pop(row.id, "")
            if unsafe:
                reason = f"skipped, no mode file: {unsafe}"
                self._finish(unit, row, view, done[row.id], config, now, reason)
                step.finished.append(row.id)
            elif not placed and done[row.id]:
                # no free GPU on the types left, but one profile exists: stop waiting
                reason = "no free GPU on the types left"
                self._finish(unit, row, view, done[row.id], config, now, reason)
                step.finished.append(row.id)

    def _running(
        self,
        row: JobRecord,
        seen: ObservedJob,
        cluster: Cluster,
        done: set[str],
        step: ProfilingStep,
        now: float,
    ) -> None:
        config = observed_config(seen, cluster)
        if config is None or seen.state != RUNNING:
            return
        attempt = self._attempts.get(row.id)
        if attempt is None or attempt.gpu_type != config.gpu_type:
            attempt = Attempt(config.gpu_type, config.node_ids[0], now)
            self._attempts[row.id] = attempt
        if config.gpu_type in done:
            self._stop(row, seen, step, f"profiled on {config.gpu_type}")
        elif now - attempt.since > self.options.timeout_s:
            self._failed.setdefault(row.id, set()).add(config.gpu_type)
            if row.id not in self.sensing.reported:
                self._no_probe.add(row.id)
            self._stop(row, seen, step, f"no profile from {config.gpu_type} in time")

    def _released(self, row: JobRecord, seen: ObservedJob, step: ProfilingStep, now: float) -> None:
        attempt = self._attempts.get(row.id)
        if attempt is None:
            return
        step.reserve(attempt.node)
        if now - attempt.since > self.options.timeout_s:
            self._failed.setdefault(row.id, set()).add(attempt.gpu_type)
            self._attempts.pop(row.id, None)
            step.actions.append(Action(row.id, seen.slurm_id, HOLD, None, "", seen.restarts, True))
            step.reasons[row.id] = f"profiling run on {attempt.gpu_type} did not start in time"

    def _stop(self, row: JobRecord, seen: ObservedJob, step: ProfilingStep, why: str) -> None:
        self._attempts.pop(row.id, None)
        step.actions.append(Action(row.id, seen.slurm_id, PREEMPT, None, "", seen.restarts, True))
        step.reasons[row.id] = f"profiling: {why}"
        log.info("event=profile-stop job=%s reason=%r", row.id, why)

    def _place(
        self,
        unit: Unit,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        types: Sequence[str],
        done: set[str],
        free: dict[str, int],
        step: ProfilingStep,
        now: float,
    ) -> bool:
        """Start a profiling run on the next type with a free GPU; False when none can start."""
        remaining = self._remaining(row.id, types, done)
        if not remaining:
            return False
        node = _pick_node(view.cluster, remaining, free)
        if node is None:
            return False
        gpu_type = view.cluster.node(node).gpu_type
        body = mode_body(self.options.iterations, seen.restarts)
        problem = self.sensing.write_mode(seen.slurm_id, row.user, body)
        if problem:
            self._unsafe[row.id] = problem
            log.warning("event=profile-skipped job=%s reason=%r", row.id, problem)
            return False
        config = Configuration(gpu_type, ((node, 1),))
        free[node] -= 1
        step.reserve(node)
        self._attempts[row.id] = Attempt(gpu_type, node, now)
        step.actions.append(
            Action(
                row.id,
                seen.slurm_id,
                PROFILE,
                config,
                view.partition_of[node],
                seen.restarts,
                seen.restarts > 0,
            )
        )
        step.reasons[row.id] = f"profiling on {gpu_type} ({node}) at {now:.3f}"
        unit.record_allocation(None, row.id, AllocationReason.START, config, now)
        log.info("event=profile-start job=%s gpu_type=%s node=%s", row.id, gpu_type, node)
        return True

    def _finish(
        self,
        unit: Unit,
        row: JobRecord,
        view: ClusterView,
        done: set[str],
        config: HopsConfig,
        now: float,
        reason: str,
    ) -> None:
        self.sensing.remove_mode(int(row.slurm_job_id or 0))
        self._derive(unit, row.id, view.cluster, done, config, now)
        unit.transition(row.id, JobState.QUEUED, now, f"profiling over: {reason}")
        self._attempts.pop(row.id, None)
        log.info("event=profile-done job=%s types=%s reason=%r", row.id, sorted(done), reason)

    @staticmethod
    def _derive(
        unit: Unit,
        job_id: str,
        cluster: Cluster,
        done: set[str],
        config: HopsConfig,
        now: float,
    ) -> None:
        """Scaled profiles for the managed types the job was not profiled on."""
        if not done:
            return
        base_type = sorted(done)[0]
        found = unit.profile(job_id, base_type)
        if found is None:
            return
        base = found[0]
        store = unit.store(now)
        base_speed = config.gpu_type(base_type).speed
        for gpu_type in managed_types(cluster):
            if gpu_type in done or unit.profile(job_id, gpu_type) is not None:
                continue
            speed = config.gpu_type(gpu_type).speed
            store.set_profile(job_id, gpu_type, scaled_profile(base, base_speed, speed), 0)

    def _remaining(self, job_id: str, types: Sequence[str], done: set[str]) -> list[str]:
        failed = self._failed.get(job_id, set())
        return [t for t in types if t not in done and t not in failed]

    def _prune(self, live: set[str]) -> None:
        for table in (self._attempts, self._failed):
            for job_id in [j for j in table if j not in live]:
                del table[job_id]
        self._no_probe &= live


def _pick_node(cluster: Cluster, types: Sequence[str], free: Mapping[str, int]) -> str | None:
    """The node with the most free GPUs among the given types (cluster order on ties)."""
    best: tuple[int, int] | None = None
    chosen = None
    for index, node in enumerate(cluster.nodes):
        if node.gpu_type not in types or free.get(node.id, 0) < 1:
            continue
        key = (free[node.id], -index)
        if best is None or key > best:
            best, chosen = key, node.id
    return chosen
