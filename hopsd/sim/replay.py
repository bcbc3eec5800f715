"""Replay what happened on a live cluster in the simulator: "what if" on the real workload.

From the ledger's records of a window (read by :mod:`hopsd.ledger.history`; this
module only sees plain records through the protocols below, so the simulator
never touches the ledger) it builds:

* the trace: every job submitted in the window, arriving when it was, with its
  demand set, size in samples and batch size. Jobs that finished are compared
  with what really happened; jobs still unfinished at the window's end (queued,
  running, profiling) are replayed as the load they were -- they held GPUs and
  competed -- at their full size, and jobs that failed or were cancelled after
  some work at the size they reached; neither is compared (their live JCT is
  unknown or not a JCT);
* a ground truth the simulator runs at: each job's *measured* per-GPU samples/s
  (hopsd learned them per GPU type and per server while the job ran), falling
  back to the nearest measured size, then to another measured type scaled by
  the types' speeds, then to the type table (``reference_throughput * speed``)
  that hopsd itself assumes for a job it has never seen run;
* the cluster: the nodes the allocations named (and those hops.conf types), with
  the GPUs the cluster reported or, failing that, the most hops ever held there.

Then it runs every policy through the same engine and scheduling step as
``hops simulate`` and sets the figures beside what the cluster really did.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hopsd.core.errors import InvalidInputError
from hopsd.core.metrics import percentile_or_zero
from hopsd.core.model import Cluster, Configuration, GpuType, Node
from hopsd.core.settings import Settings
from hopsd.core.throughput import PhaseProfile
from hopsd.core.typed_settings import settings_table
from hopsd.plugins import policy_spec
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.metrics import JobRecord, job_records, summarise
from hopsd.sim.run import _write_outputs, check_request, run_policy
from hopsd.sim.state import EngineResult
from hopsd.sim.truth import (
    BACKWARD_SHARE,
    FORWARD_SHARE,
    UPDATE_SHARE,
    GroundTruth,
    LearnedRestart,
    ModelSpec,
)
from hopsd.sim.workload import JobSpec

ENTITY_AGG = "entity_agg"
ENTITY_DIST = "entity_dist"
TYPE_AGG = "type_agg"
TYPE_DIST = "type_dist"
#: Live states of jobs that ended other than by finishing.
ENDED = frozenset({"failed", "cancelled"})


class ReplayJob(Protocol):
    """What the replay reads of one live job."""

    @property
    def job_id(self) -> str: ...
    @property
    def slurm_job_id(self) -> int | None: ...
    @property
    def user(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def submit_time(self) -> float: ...
    @property
    def first_start_time(self) -> float | None: ...
    @property
    def end_time(self) -> float | None: ...
    @property
    def demands(self) -> tuple[int, ...]: ...
    @property
    def total_samples(self) -> float: ...
    @property
    def samples_done(self) -> float: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def model_name(self) -> str: ...
    @property
    def params(self) -> float: ...
    @property
    def wait_time(self) -> float: ...
    @property
    def restarts(self) -> int: ...
    @property
    def latency_ratio(self) -> float | None: ...
    @property
    def startup_s(self) -> float | None: ...
    @property
    def checkpoint_s(self) -> float | None: ...
    @property
    def restart_s(self) -> float | None: ...
    @property
    def model_restart_s(self) -> float | None: ...


class ReplayRate(Protocol):
    """One learned per-GPU throughput (layer, place, size as the ledger keeps them)."""

    @property
    def job_id(self) -> str: ...
    @property
    def layer(self) -> str: ...
    @property
    def place(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def per_gpu(self) -> float: ...


class ReplayNode(Protocol):
    """A node an allocation named, with the most GPUs hops held there at once."""

    @property
    def node(self) -> str: ...
    @property
    def gpu_type(self) -> str: ...
    @property
    def peak_gpus(self) -> int: ...


class ReplayPlacement(Protocol):
    """One allocation row: start, keep, move, preempt or end of a job at ``at``."""

    @property
    def job_id(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def gpu_type(self) -> str | None: ...
    @property
    def parts(self) -> tuple[tuple[str, int], ...]: ...
    @property
    def at(self) -> float: ...


@dataclass
class JobRates:
    """One job's learned per-GPU samples/s, and how to answer for what it never ran."""

    types: Mapping[str, GpuType]
    reference: float
    by_layer: dict[str, dict[tuple[str, int], float]] = field(default_factory=dict)
    node_factor: dict[str, float] = field(default_factory=dict)

    def add(self, layer: str, place: str, size: int, per_gpu: float) -> None:
        if per_gpu > 0 and size > 0:
            self.by_layer.setdefault(layer, {})[(place, size)] = per_gpu

    def measured_types(self) -> set[str]:
        return {
            place for layer in (TYPE_AGG, TYPE_DIST) for place, _ in self.by_layer.get(layer, {})
        }

    def type_rate(self, gpu_type: str, gpus: int, n_nodes: int = 1) -> float:
        """Per-GPU rate on ``gpu_type``: exact size, nearest size, scaled type, type table."""
        own = self._type_rate(gpu_type, gpus, n_nodes)
        if own is not None:
            return own
        speed = self.types[gpu_type].speed if gpu_type in self.types else 1.0
        for other in sorted(self.measured_types()):
            found = self._type_rate(other, gpus, n_nodes)
            if found is not None and other in self.types:
                return found * speed / self.types[other].speed
        return self.reference * speed

    def _type_rate(self, gpu_type: str, gpus: int, n_nodes: int) -> float | None:
        layer, size = (TYPE_DIST, n_nodes) if n_nodes > 1 else (TYPE_AGG, gpus)
        exact = self.by_layer.get(layer, {}).get((gpu_type, size))
        if exact is not None:
            return exact
        # Nearest measured size on this type, either layer, by ratio of GPU counts.
        options: list[tuple[float, float]] = []
        for lay in (TYPE_AGG, TYPE_DIST):
            for (place, s), value in self.by_layer.get(lay, {}).items():
                if place == gpu_type:
                    options.append((abs(math.log(max(s, 1) / max(size, 1))), value))
        return min(options)[1] if options else None

    def node_rate(self, node: str, gpu_type: str, gpus_here: int, n_nodes: int) -> float:
        """Per-GPU rate one node of a configuration sustains (its own measurement first)."""
        layer, size = (ENTITY_DIST, n_nodes) if n_nodes > 1 else (ENTITY_AGG, gpus_here)
        exact = self.by_layer.get(layer, {}).get((node, size))
        if exact is not None:
            return exact
        total = gpus_here * n_nodes
        return self.type_rate(gpu_type, total, n_nodes) * self.node_factor.get(node, 1.0)


@dataclass(frozen=True, slots=True)
class AssumedModel(ModelSpec):
    """A live job as the scheduler first sees it: profiling tells it ``assumed`` per type.

    hopsd without profiling knows nothing of a new job but the type table
    (``reference_throughput * speed``) until it measures the job; the replay
    hands the simulated estimator that same table as the job's "profile", so
    the replay learns as late as hopsd did. With profiling on, ``assumed`` is the
    measured rates (what a profile would have found).
    """

    assumed: Mapping[str, float] = field(default_factory=dict)

    def profile(
        self, gpu_type: str, data_factor: float, batch_size: int | None = None
    ) -> PhaseProfile:
        batch = batch_size or self.batch_size
        c = batch / self.assumed.get(gpu_type, self.throughput[gpu_type])
        return PhaseProfile(
            t_f=FORWARD_SHARE * c,
            t_b=BACKWARD_SHARE * c,
            t_u=UPDATE_SHARE * c,
            pattern=self.pattern,
            data=self.data_mixture(data_factor, batch),
        )


@dataclass
class ReplayTruth(GroundTruth):
    """Ground truth from measurements: each job (its own model) runs at its learned rates."""

    rates: Mapping[str, JobRates] = field(default_factory=dict)

    def _compute(
        self, model: str, config: Configuration, batch_size: int | None
    ) -> tuple[float, tuple[float, ...]]:
        job = self.rates.get(model)
        if job is None:
            return super()._compute(model, config, batch_size)
        rates = tuple(
            job.node_rate(node, config.gpu_type, gpus, config.n_nodes)
            for node, gpus in config.parts
        )
        return min(rates) * config.total_gpus, rates

    def single_gpu(
        self,
        model: str,
        gpu_type: str,
        data_factor: float = 1.0,
        batch_size: int | None = None,
    ) -> float:
        """The job's measured single-GPU rate on a type (ages and latency ratios use it)."""
        job = self.rates.get(model)
        if job is None:
            return super().single_gpu(model, gpu_type, data_factor, batch_size)
        return job.type_rate(gpu_type, 1)


@dataclass(frozen=True)
class ReplayWorld:
    """The trace, the measured truth and the live figures of one window."""

    truth: ReplayTruth
    jobs: list[JobSpec]
    live: dict[str, ReplayJob]  # by trace job id: the finished jobs, compared
    origin: float  # epoch seconds of trace time 0
    skipped: dict[str, int]
    load_only: dict[str, str] = field(default_factory=dict)  # trace id -> live state

    def compared(self, records: Sequence[JobRecord]) -> list[JobRecord]:
        """The records of the jobs compared with the live run (finished ones)."""
        return [r for r in records if r.job_id in self.live]


def model_of(job_id: str) -> str:
    """The per-job model name of the trace: each live job is its own model."""
    return f"job:{job_id}"


def _node_factors(
    rates: Sequence[ReplayRate], kind: Mapping[str, str]
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """A server's measured rate over its type's at the same size: per job, and across jobs.

    A job never measured on a server takes the median factor other jobs saw there
    (a slow host is slow for everyone it holds back), else 1.
    """
    per_type = {
        (r.job_id, r.layer, r.place, r.size): r.per_gpu
        for r in rates
        if r.layer in (TYPE_AGG, TYPE_DIST)
    }
    own: dict[str, dict[str, list[float]]] = {}
    for r in rates:
        if r.layer not in (ENTITY_AGG, ENTITY_DIST) or r.per_gpu <= 0 or r.place not in kind:
            continue
        layer = TYPE_AGG if r.layer == ENTITY_AGG else TYPE_DIST
        typed = per_type.get((r.job_id, layer, kind[r.place], r.size))
        if typed is not None and typed > 0:
            own.setdefault(r.job_id, {}).setdefault(r.place, []).append(r.per_gpu / typed)
    per_job = {j: {n: statistics.fmean(v) for n, v in nodes.items()} for j, nodes in own.items()}
    across: dict[str, list[float]] = {}
    for nodes in per_job.values():
        for node, value in nodes.items():
            across.setdefault(node, []).append(value)
    return per_job, {n: statistics.median(v) for n, v in across.items()}


def build_cluster(
    nodes: Sequence[ReplayNode],
    types: Mapping[str, GpuType],
    node_types: Mapping[str, str],
    inventory: Mapping[str, tuple[str, int]],
) -> Cluster:
    """Managed nodes: those the cluster lists in the managed partitions (``inventory``:
    node -> (GPU type, GPUs)), those allocations named, and those hops.conf types.

    A node's type: hops.conf, else Slurm's, else the allocations'. Its GPUs: what
    Slurm reports, else the most hops held there at once, else the most of any
    node of its type.
    """
    kind: dict[str, str] = {name: t for name, (t, _) in inventory.items() if t}
    for n in nodes:
        kind.setdefault(n.node, n.gpu_type)
    kind.update({name: t for name, t in node_types.items() if t})
    peak = {n.node: n.peak_gpus for n in nodes}
    listed = {name: gpus for name, (_, gpus) in inventory.items() if gpus > 0}
    by_type: dict[str, int] = {}
    for name, gpu_type in kind.items():
        seen = listed.get(name) or peak.get(name, 0)
        by_type[gpu_type] = max(by_type.get(gpu_type, 0), seen)
    core_nodes = []
    for name in sorted(kind):
        gpu_type = kind[name]
        gpus = listed.get(name) or peak.get(name) or by_type.get(gpu_type, 0)
        if gpu_type and gpus > 0:
            core_nodes.append(Node(name, gpu_type, gpus))
    if not core_nodes:
        raise InvalidInputError("no managed node is known: no allocation names one")
    used = sorted({n.gpu_type for n in core_nodes})
    return Cluster.build((types.get(t) or GpuType(t) for t in used), core_nodes)


def build_world(
    jobs: Sequence[ReplayJob],
    rates: Sequence[ReplayRate],
    nodes: Sequence[ReplayNode],
    *,
    types: Mapping[str, GpuType],
    reference_throughput: float,
    node_types: Mapping[str, str] | None = None,
    inventory: Mapping[str, tuple[str, int]] | None = None,
    profiled: bool = False,
    restart_cost_s: float | None = None,
    launch_s: Mapping[str, float] | None = None,
    grace_s: float | None = None,
    profiled_jobs: frozenset[str] | None = None,
    excluded_types: Mapping[str, frozenset[str]] | None = None,
) -> ReplayWorld:
    """Trace, measured truth and cluster of a window (see the module docstring).

    ``profiled``: hopsd profiled new jobs (the simulated estimator then starts from
    the measured rates; otherwise from the type table, as hopsd did).
    ``restart_cost_s``: what a move or restart really cost on the cluster (the
    requeue, relaunch and restore until the job trains again); every replayed
    job is charged it while the planner keeps pricing moves at hops.conf's
    ``restart_penalty_s``, as hopsd did. None: the penalty is the cost.
    ``launch_s``: per job, what its first start cost before it trained
    (:func:`measured_launch`); none charged to a job not in it.
    ``grace_s`` (hops.conf's checkpoint grace): the planner prices each job's
    moves as hopsd did, at the restart cost it learns from the job's probe
    (:class:`~hopsd.sim.truth.LearnedRestart`; the prior until the replayed job
    restarted, as live), while the job is charged what a restart really cost.
    None: moves are priced at what they cost.
    ``profiled_jobs``: the jobs hopsd profiled (where the replay profiles, the others
    are planned at once, as live); None: every job. ``excluded_types``: per job, the
    GPU types its tag kept it off (``--types``/``--exclude-types``), never given to it.
    """
    cluster = build_cluster(nodes, types, node_types or {}, inventory or {})
    done = [j for j in jobs if j.state == "done" and j.end_time is not None]
    if not done:
        raise InvalidInputError(
            f"no finished job in the window ({len(jobs)} job(s) submitted in it)"
        )
    skipped: dict[str, int] = {}
    replayed: list[tuple[ReplayJob, float]] = []
    for j in jobs:
        size = replay_size(j)
        if size is None:
            skipped[j.state] = skipped.get(j.state, 0) + 1
        else:
            replayed.append((j, size))
    largest = max(sum(n.gpus for n in cluster.nodes if n.gpu_type == t) for t in cluster.gpu_types)
    origin = min(j.submit_time for j, _ in replayed)
    per_job, across = _node_factors(rates, {n.id: n.gpu_type for n in cluster.nodes})
    by_job: dict[str, list[ReplayRate]] = {}
    for r in rates:
        by_job.setdefault(r.job_id, []).append(r)
    models: dict[str, ModelSpec] = {}
    tables: dict[str, JobRates] = {}
    specs: list[JobSpec] = []
    live: dict[str, ReplayJob] = {}
    load_only: dict[str, str] = {}
    for j, size in replayed:
        demands = tuple(d for d in j.demands if d <= largest)
        if not demands:
            skipped["too_large"] = skipped.get("too_large", 0) + 1
            continue
        table = JobRates(cluster.gpu_types, reference_throughput)
        for r in by_job.get(j.job_id, []):
            table.add(r.layer, r.place, r.size, r.per_gpu)
        table.node_factor = {**across, **per_job.get(j.job_id, {})}
        name = model_of(j.job_id)
        tables[name] = table
        measured = {t: table.type_rate(t, 1) for t in cluster.gpu_types}
        table_rate = {t: reference_throughput * g.speed for t, g in cluster.gpu_types.items()}
        models[name] = AssumedModel(
            name=name,
            params=max(j.params, 0.0),
            batch_size=max(j.batch_size, 1),
            throughput=measured,
            assumed=measured if profiled else table_rate,
            # what its restarts cost, measured whole by hopsd; else the window's median
            restore_s=j.restart_s if j.restart_s is not None else restart_cost_s,
            launch_s=(launch_s or {}).get(j.job_id, 0.0),
            priced_as=(
                LearnedRestart(
                    j.startup_s, j.checkpoint_s, grace_s, j.restart_s, j.model_restart_s
                )
                if grace_s is not None
                else None
            ),
            profiled=profiled_jobs is None or j.job_id in profiled_jobs,
            max_gpus={t: 0 for t in (excluded_types or {}).get(j.job_id, frozenset())},
        )
        trace_id = str(j.slurm_job_id) if j.slurm_job_id is not None else j.job_id
        specs.append(
            JobSpec(
                job_id=trace_id,
                submit_time=round(j.submit_time - origin, 3),
                demands=demands,
                total_samples=size,
                model=name,
                user=j.user,
                batch_size=max(j.batch_size, 1),
            )
        )
        if j.state == "done" and j.end_time is not None:
            live[trace_id] = j
        else:
            load_only[trace_id] = j.state
    if not live:
        raise InvalidInputError("no finished job of the window fits the cluster")
    truth = ReplayTruth(cluster, models, rates=tables)
    return ReplayWorld(truth, specs, live, origin, skipped, load_only)


def measured_launch(
    jobs: Sequence[ReplayJob], placements: Sequence[ReplayPlacement], tick_s: float
) -> dict[str, float]:
    """What each job's first start cost before it trained: from hopsd's start decision
    to Slurm running it (launch), plus the job's own start to first iteration
    (``startup_s``, when its probe reported it). Jobs never started are left out.

    hopsd sees a job running at the first tick after Slurm started it, so
    Slurm's start lies within the ``tick_s`` before ``first_start_time`` (and
    not before the decision): the launch is the middle of that span.
    """
    decided: dict[str, float] = {}
    for p in sorted(placements, key=lambda p: p.at):
        if p.reason == "start":
            decided.setdefault(p.job_id, p.at)
    out: dict[str, float] = {}
    for j in jobs:
        at = decided.get(j.job_id)
        if at is None or j.first_start_time is None:
            continue
        latest = max(j.first_start_time - at, 0.0)
        earliest = max(latest - tick_s, 0.0)
        out[j.job_id] = (earliest + latest) / 2 + max(j.startup_s or 0.0, 0.0)
    return out


def measured_restart_cost(
    world: ReplayWorld, placements: Sequence[ReplayPlacement]
) -> float | None:
    """What a restart really cost on the cluster: the median over finished, restarted jobs.

    A job's placements (start or move until the next start, move, preempt or
    end) at its measured rates would have done more samples than it had, had
    every relaunch been free (and its first launch, the truth's ``launch_s``);
    the excess, over the rates of the placements that began with a relaunch,
    is the time each relaunch cost it (requeue, Slurm's launch, the job's own
    restore until it trains again). None when no finished job was ever
    restarted.
    """
    by_job: dict[str, list[ReplayPlacement]] = {}
    for p in sorted(placements, key=lambda p: p.at):
        by_job.setdefault(p.job_id, []).append(p)
    costs: list[float] = []
    for live in world.live.values():
        if live.restarts <= 0 or live.end_time is None:
            continue
        spans = _spans(by_job.get(live.job_id, []), live.end_time)
        if not spans:
            continue
        rate_of = world.truth.throughput
        model = model_of(live.job_id)
        launch = world.truth.model(model).launch_s
        first = min(launch, spans[0][2] - spans[0][1])
        done = sum(rate_of(model, cfg) * (end - begin) for cfg, begin, end in spans)
        done -= rate_of(model, spans[0][0]) * first
        relaunched = sum(rate_of(model, cfg) for cfg, _, _ in spans[1:])
        if relaunched > 0:
            costs.append(max((done - live.total_samples) / relaunched, 0.0))
    return statistics.median(costs) if costs else None


def _spans(
    rows: Sequence[ReplayPlacement], end_time: float
) -> list[tuple[Configuration, float, float]]:
    """(placement, from, to) of each stretch a job held GPUs (keeps do not break one)."""
    spans: list[tuple[Configuration, float, float]] = []
    current: tuple[Configuration, float] | None = None
    for row in rows:
        if row.reason == "keep":
            continue
        if current is not None:
            spans.append((current[0], current[1], row.at))
            current = None
        if row.reason in ("start", "move") and row.parts and row.gpu_type:
            current = (Configuration(row.gpu_type, tuple(row.parts)), row.at)
    if current is not None:
        spans.append((current[0], current[1], max(end_time, current[1])))
    return spans


def replay_size(job: ReplayJob) -> float | None:
    """The samples a live job is replayed with; None when it is not replayed.

    Finished: its size. Still unfinished: its size (it would have run on).
    Failed or cancelled: the samples it reached before it ended, if any (the
    load it really was); one that never progressed is left out.
    """
    if job.state == "done" and job.end_time is not None:
        return job.total_samples
    if job.state not in ENDED and job.end_time is None:
        return job.total_samples
    done = min(job.samples_done, job.total_samples)
    return done if done > 0 else None


def _count(states: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for state in states:
        out[state] = out.get(state, 0) + 1
    return out


def live_figures(world: ReplayWorld) -> dict[str, float]:
    """What the cluster really did for the replayed jobs (seconds)."""
    jcts = [float(j.end_time or 0.0) - j.submit_time for j in world.live.values()]
    lrs = [j.latency_ratio for j in world.live.values() if j.latency_ratio is not None]
    return {
        "avg_jct_s": float(np.mean(jcts)),
        "median_jct_s": percentile_or_zero(jcts, 50),
        "p99_jct_s": percentile_or_zero(jcts, 99),
        "avg_wait_s": float(np.mean([j.wait_time for j in world.live.values()])),
        "max_lr": max(lrs, default=0.0),
        "restarts": float(sum(j.restarts for j in world.live.values())),
    }


def sim_figures(result: EngineResult, records: Sequence[JobRecord]) -> dict[str, float]:
    """The same figures for one replayed policy (plus the simulator's own, in hours)."""
    jcts = [r.jct_s for r in records]
    out = {
        "avg_jct_s": float(np.mean(jcts)),
        "median_jct_s": percentile_or_zero(jcts, 50),
        "p99_jct_s": percentile_or_zero(jcts, 99),
        "avg_wait_s": float(np.mean([r.wait_s for r in records])),
        "max_lr": max((r.latency_ratio for r in records), default=0.0),
        "restarts": float(sum(r.restarts for r in records)),
    }
    out.update({k: v for k, v in summarise(result, records).items() if k not in out})
    return out


def replay_engine_config(
    settings: Settings,
    *,
    spare_guard_s: float,
    adoption_s: float,
    measure_after_s: float,
    profile_s: float = 0.0,
) -> EngineConfig:
    """The simulated world of a replay: hopsd's settings, no noise (the truth was measured).

    ``adoption_s`` stands for the delay before hopsd adopts a new job (half a queue
    refresh on average); ``profile_s`` for its profiling phase where hopsd profiles
    (its runs train the job on one GPU of each type in turn, as live).
    """
    return EngineConfig(
        settings=settings,
        profile_s=profile_s,
        adoption_s=adoption_s,
        profile_noise=0.0,
        measure_noise=0.0,
        measure_after_s=measure_after_s,
        spare_guard_s=spare_guard_s,
    )


def replay(
    world: ReplayWorld,
    policies: Sequence[str],
    config: EngineConfig,
    out_dir: str | Path | None = None,
    own: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """Run ``policies`` on the window's trace; the results object of ``hops replay``.

    ``own`` holds policies' own settings (hops.conf's ``[policies.NAME]``); a
    policy without an entry runs with its defaults.
    """
    check_request(policies, out_dir, own)
    own = {name: (own or {}).get(name) or policy_spec(name).defaults for name in policies}
    figures: dict[str, dict[str, float]] = {}
    records: dict[str, list[JobRecord]] = {}
    results: dict[str, EngineResult] = {}
    for name in policies:
        result = run_policy(world.truth, world.jobs, name, replace(config), own=own[name])
        results[name] = result
        records[name] = job_records(world.truth, result)
        figures[name] = sim_figures(result, world.compared(records[name]))
    per_job = []
    for spec in world.jobs:
        live = world.live.get(spec.job_id)
        if live is None:
            continue  # replayed as load only
        row: dict[str, Any] = {
            "job_id": spec.job_id,
            "demands": list(spec.demands),
            "submit_s": spec.submit_time,
            "live_jct_s": round(float(live.end_time or 0.0) - live.submit_time, 3),
        }
        for name in policies:
            rec = next(r for r in records[name] if r.job_id == spec.job_id)
            row[f"{name}_jct_s"] = round(rec.jct_s, 3)
        per_job.append(row)
    out: dict[str, Any] = {
        "window": {"from": world.origin},
        "n_jobs": len(world.live),
        "load_only": _count(world.load_only.values()),
        "skipped": dict(world.skipped),
        "total_gpus": world.truth.cluster.total_gpus,
        "nodes": {n.id: [n.gpu_type, n.gpus] for n in world.truth.cluster.nodes},
        "round_length_s": config.settings.round_length_s,
        "restart_penalty_s": config.settings.restart_penalty_s,
        "spare_guard_s": config.spare_guard_s,
        "live": live_figures(world),
        "policies": figures,
        "policy_settings": {name: settings_table(own[name]) for name in policies},
        "jobs": per_job,
    }
    if out_dir is not None:
        _write_outputs(Path(out_dir), out, world.jobs, records, results)
    return out
