"""The profiling queue's rules: which new jobs are profiled, where, and when it ends.

A new job is run briefly on one GPU of each GPU type before it joins the
waiting queue, so the planner knows its phase times per type instead of
guessing from the admin's table. hopsd (live Slurm) and the simulator follow
the same rules by calling :func:`profiling_step` (the scheduling step does it
for them, :func:`hopsd.core.step.schedule_step`); they differ only in how a
run is enacted and how its report comes back.

The rules, for each job in its profiling phase (oldest submission first;
with profiling switched off, runs stop and held jobs queue):

* a run in flight whose type is now profiled is stopped;
* a run that reports no profile within ``timeout_s`` of starting is stopped;
* a run released but not started within ``timeout_s`` is held again and its
  type skipped;
* a type the job's *model* was already measured on is not profiled again:
  an earlier job of the same model name and per-GPU batch size measured it
  (``Profilee.known``, the newest measurement per type), so a job whose
  model is known on every type it can run on joins the queue at once, with
  no profiling run and so no restart for one;
* a job whose profiling is over joins the queue: nothing left to profile, a
  run that ended without a report (the job has no probe, or the probe cannot
  work here: more runs would only restart it for nothing; it is scheduled
  from priors and learns from its real run if it ever reports), the phase
  deadline ``timeout_s * (types + 1)`` passed, no type left to profile has a
  free GPU now while one profile exists, its own or its model's (the others
  are derived from it,
  :func:`derived_types`);
* a job whose profiling is over is planned in the same step, with the
  profile of each type it was not profiled on taken from its model's known
  one, else scaled from a measured one (:func:`derived_profiles`, the rule
  hopsd also writes to its ledger);
* otherwise it is placed on one free GPU of a type it still needs (the node
  with the most free GPUs), taking that GPU before the planner sees it.

A run only ever takes an idle GPU: profiling never preempts anybody.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hopsd.core.fitting import scaled_profile
from hopsd.core.model import Cluster, Job
from hopsd.core.nodespeed import store_speeds
from hopsd.core.throughput import PhaseProfile, ThroughputStore

STOP_DONE = "profiled on {t}"
STOP_SILENT = "no profile from {t} in time"
NOT_STARTED = "profiling run on {t} did not start in time"
OVER_ALL_TYPES = "profiled on every type it could be"
OVER_KNOWN = "its model was measured on every type left"
OVER_SILENT = "a profiling run gave no report: scheduled from priors"
OVER_DEADLINE = "profiling deadline passed"
OVER_NO_GPU = "no free GPU on the types left"
OVER_OFF = "profiling is off"


@dataclass(frozen=True)
class ProfilingRules:
    """Whether new jobs are profiled and how long a run may take to report."""

    enabled: bool = False
    timeout_s: float = 60.0


@dataclass(frozen=True)
class RunInFlight:
    """A profiling run placed earlier: where, since when, and whether it runs yet.

    ``started`` means the job runs (its GPU is already out of the snapshot's
    capacity); otherwise it was released and waits to start, and the step
    keeps its GPU free for it.
    """

    gpu_type: str
    node: str
    since: float
    started: bool


@dataclass(frozen=True)
class KnownProfile:
    """A profile of the job's model measured on an earlier job (same model name and
    per-GPU batch size): what the job itself would measure on that type."""

    gpu_type: str
    profile: PhaseProfile


@dataclass(frozen=True)
class Profilee:
    """A job in its profiling phase, as the caller observed it.

    ``runs`` counts the profiling runs placed so far, the one in flight
    included; ``profiled`` the types with a measured profile; ``skipped`` the
    types whose run never started in time. ``job`` is the job as the planner
    will see it once its profiling is over: the step plans it at once (None:
    from the next step on). ``known``: profiles of its model, one per type,
    from earlier jobs (empty when it names no model or none ran before).
    """

    job_id: str
    submit_time: float
    since: float
    profiled: frozenset[str] = frozenset()
    skipped: frozenset[str] = frozenset()
    run: RunInFlight | None = None
    runs: int = 0
    job: Job | None = None
    known: tuple[KnownProfile, ...] = ()

    @property
    def known_types(self) -> frozenset[str]:
        return frozenset(k.gpu_type for k in self.known)

    @property
    def silent_runs(self) -> int:
        """Runs that ended without giving a profile."""
        ended = self.runs - (1 if self.run is not None else 0)
        return max(ended - len(self.profiled), 0)


@dataclass(frozen=True)
class ProfilingRun:
    """Start a profiling run: the job on one GPU of ``node`` (of type ``gpu_type``)."""

    job_id: str
    gpu_type: str
    node: str


@dataclass(frozen=True)
class ProfilingDecision:
    """What the profiling queue does now.

    ``start``: new runs; ``stop``: runs to end (requeue and hold the job);
    ``hold``: released runs that did not start in time (hold them again);
    ``finish``: jobs whose profiling is over, to join the queue (with why);
    ``reserved``: GPUs per node the planner must leave alone this step
    (runs placed now or released but not started yet).
    """

    start: tuple[ProfilingRun, ...] = ()
    stop: tuple[tuple[str, str], ...] = ()
    hold: tuple[tuple[str, str], ...] = ()
    finish: tuple[tuple[str, str], ...] = ()
    reserved: Mapping[str, int] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def acted(self) -> bool:
        return bool(self.start or self.stop or self.hold or self.finish)


def profiled_types_of(cluster: Cluster) -> list[str]:
    """The GPU types a job is profiled on: every type with GPUs, in name order."""
    return sorted({n.gpu_type for n in cluster.nodes if n.gpus > 0})


def types_to_profile(cluster: Cluster, job: Job | None) -> list[str]:
    """The types ``job`` is profiled on: those of :func:`profiled_types_of` it runs on at
    all (a model that does not fit a type is not profiled there; None: every type)."""
    return [t for t in profiled_types_of(cluster) if job is None or job.demands_on(t)]


def derived_types(cluster: Cluster, profiled: frozenset[str]) -> tuple[str | None, list[str]]:
    """The measured type other types' profiles are scaled from, and the types to derive.

    None and no types when nothing was measured (the job then runs on priors).
    """
    if not profiled:
        return None, []
    base = sorted(profiled)[0]
    return base, [t for t in profiled_types_of(cluster) if t not in profiled]


class _Pass:
    """One profiling step's working state: free GPUs left and what was decided."""

    def __init__(self, free: Mapping[str, int]) -> None:
        self.free = dict(free)
        self.start: list[ProfilingRun] = []
        self.stop: list[tuple[str, str]] = []
        self.hold: list[tuple[str, str]] = []
        self.finish: list[tuple[str, str]] = []
        self.reserved: dict[str, int] = {}
        self.reasons: dict[str, str] = {}

    def reserve(self, node: str) -> None:
        self.reserved[node] = self.reserved.get(node, 0) + 1
        self.free[node] = max(self.free.get(node, 0) - 1, 0)

    def over(self, job_id: str, why: str) -> None:
        self.finish.append((job_id, why))
        self.reasons[job_id] = f"profiling over: {why}"

    def decision(self) -> ProfilingDecision:
        return ProfilingDecision(
            tuple(self.start),
            tuple(self.stop),
            tuple(self.hold),
            tuple(self.finish),
            self.reserved,
            self.reasons,
        )


def profiling_step(
    profilees: Sequence[Profilee],
    cluster: Cluster,
    free: Mapping[str, int],
    rules: ProfilingRules,
    now: float,
) -> ProfilingDecision:
    """Decide every profiling job's next move; ``free`` is idle GPUs per node now."""
    work = _Pass(free)
    types = profiled_types_of(cluster)
    for job in sorted(profilees, key=lambda p: (p.submit_time, p.job_id)):
        if not rules.enabled and job.run is None:
            work.over(job.job_id, OVER_OFF)  # switched off: held jobs queue, runs end first
        elif not rules.enabled:
            work.stop.append((job.job_id, OVER_OFF))
        elif job.run is not None:
            _in_flight(job, job.run, rules, now, work)
        else:
            _held(job, cluster, types, rules, now, work)
    return work.decision()


def _in_flight(
    job: Profilee, run: RunInFlight, rules: ProfilingRules, now: float, work: _Pass
) -> None:
    late = now - run.since > rules.timeout_s
    if run.started:
        if run.gpu_type in job.profiled:
            work.stop.append((job.job_id, STOP_DONE.format(t=run.gpu_type)))
        elif late:
            work.stop.append((job.job_id, STOP_SILENT.format(t=run.gpu_type)))
        else:
            work.reasons[job.job_id] = f"profiling on {run.gpu_type} ({run.node})"
        return
    work.reserve(run.node)
    if late:
        work.hold.append((job.job_id, NOT_STARTED.format(t=run.gpu_type)))
    else:
        work.reasons[job.job_id] = f"profiling run on {run.gpu_type} ({run.node}) starting"


def _held(
    job: Profilee,
    cluster: Cluster,
    types: Sequence[str],
    rules: ProfilingRules,
    now: float,
    work: _Pass,
) -> None:
    known = job.known_types
    own = types_to_profile(cluster, job.job)
    remaining = [
        t for t in own if t not in job.profiled and t not in job.skipped and t not in known
    ]
    if not remaining:
        work.over(job.job_id, OVER_KNOWN if known - job.profiled else OVER_ALL_TYPES)
    elif job.silent_runs > 0:
        work.over(job.job_id, OVER_SILENT)
    elif now > job.since + rules.timeout_s * (len(types) + 1):
        work.over(job.job_id, OVER_DEADLINE)
    else:
        node = pick_node(cluster, remaining, work.free)
        if node is not None:
            gpu_type = cluster.node(node).gpu_type
            work.start.append(ProfilingRun(job.job_id, gpu_type, node))
            work.reserve(node)
            work.reasons[job.job_id] = f"profiling on {gpu_type} ({node})"
        elif job.profiled or known:
            work.over(job.job_id, OVER_NO_GPU)
        else:
            work.reasons[job.job_id] = "waiting for a free GPU to be profiled on"


def pick_node(cluster: Cluster, types: Sequence[str], free: Mapping[str, int]) -> str | None:
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


class WithDerived:
    """A throughput store that also answers the derived profiles of jobs just profiled.

    For a job in ``joining`` (its profiling just ended), a type it was not
    profiled on gets :func:`derived_profiles`' answer; everything else is the
    wrapped store's.
    """

    def __init__(
        self, store: ThroughputStore, cluster: Cluster, joining: Mapping[str, Profilee]
    ) -> None:
        self._store = store
        self._cluster = cluster
        self._joining = joining
        self._derived: dict[str, dict[str, PhaseProfile]] = {}

    def entity_aggregated(self, job_id: str, node_id: str, gpus: int) -> float | None:
        return self._store.entity_aggregated(job_id, node_id, gpus)

    def entity_distributed(self, job_id: str, node_id: str, n_nodes: int) -> float | None:
        return self._store.entity_distributed(job_id, node_id, n_nodes)

    def type_aggregated(self, job_id: str, gpu_type: str, gpus: int) -> float | None:
        return self._store.type_aggregated(job_id, gpu_type, gpus)

    def type_distributed(self, job_id: str, gpu_type: str, n_nodes: int) -> float | None:
        return self._store.type_distributed(job_id, gpu_type, n_nodes)

    def node_speeds(self) -> Mapping[str, float]:
        """The wrapped store's per-node speed prior (:mod:`hopsd.core.nodespeed`)."""
        return store_speeds(self._store)

    def profile(self, job_id: str, gpu_type: str) -> PhaseProfile | None:
        found = self._store.profile(job_id, gpu_type)
        joining = self._joining.get(job_id)
        if found is not None or joining is None:
            return found
        if job_id not in self._derived:
            own = {t: p for t in joining.profiled if (p := self._store.profile(job_id, t))}
            self._derived[job_id] = derived_profiles(self._cluster, own, joining.known)
        return self._derived[job_id].get(gpu_type)


def derived_profiles(
    cluster: Cluster, own: Mapping[str, PhaseProfile], known: Sequence[KnownProfile]
) -> dict[str, PhaseProfile]:
    """Profiles of the types a job was not profiled on (``own``: its measured ones).

    A type its model is known on takes the known profile as is (the same model
    at the same batch measured it there, host included); any other type the
    measured profile of :func:`derived_types`' base (the job's own, else a
    known one) scaled by the admin's relative type speeds. Empty when nothing
    was measured.
    """
    types = set(profiled_types_of(cluster))
    measured = {k.gpu_type: k.profile for k in known if k.gpu_type in types - set(own)}
    out = dict(measured)
    bases = dict(measured)
    bases.update(own)
    base_type, targets = derived_types(cluster, frozenset(own) or frozenset(bases))
    if base_type is None:
        return out
    speeds = cluster.gpu_types
    for gpu_type in targets:
        if gpu_type not in out and gpu_type not in own:
            out[gpu_type] = scaled_profile(
                bases[base_type], speeds[base_type].speed, speeds[gpu_type].speed
            )
    return out
