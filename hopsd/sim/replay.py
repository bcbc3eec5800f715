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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hopsd.core.admission import largest_config, runnable
from hopsd.core.errors import InvalidInputError
from hopsd.core.metrics import percentile_or_zero
from hopsd.core.model import Cluster, GpuType, Node
from hopsd.core.settings import Settings
from hopsd.core.typed_settings import settings_table
from hopsd.plugins import policy_spec
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.metrics import JobRecord, job_records, summarise
from hopsd.sim.replay_inputs import ReplayJob, ReplayNode, ReplayRate
from hopsd.sim.replay_truth import AssumedModel, JobRates, ReplayTruth, node_factors
from hopsd.sim.run import _write_outputs, check_request, run_policy
from hopsd.sim.state import EngineResult
from hopsd.sim.truth import (
    LearnedRestart,
    ModelSpec,
)
from hopsd.sim.workload import JobSpec

#: Live states of jobs that ended other than by finishing.
ENDED = frozenset({"failed", "cancelled"})


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


def _replayed(jobs: Sequence[ReplayJob]) -> tuple[list[tuple[ReplayJob, float]], dict[str, int]]:
    """The jobs replayed, each with its size (:func:`replay_size`), and the count of
    those left out per live state."""
    skipped: dict[str, int] = {}
    replayed: list[tuple[ReplayJob, float]] = []
    for j in jobs:
        size = replay_size(j)
        if size is None:
            skipped[j.state] = skipped.get(j.state, 0) + 1
        else:
            replayed.append((j, size))
    return replayed, skipped


@dataclass(frozen=True)
class _Measured:
    """The window's learned rates, by job, and the servers' factors over their types."""

    cluster: Cluster
    reference_throughput: float
    by_job: Mapping[str, Sequence[ReplayRate]]
    per_job: Mapping[str, Mapping[str, float]]
    across: Mapping[str, float]

    @staticmethod
    def of(rates: Sequence[ReplayRate], cluster: Cluster, reference: float) -> _Measured:
        per_job, across = node_factors(rates, {n.id: n.gpu_type for n in cluster.nodes})
        by_job: dict[str, list[ReplayRate]] = {}
        for r in rates:
            by_job.setdefault(r.job_id, []).append(r)
        return _Measured(cluster, reference, by_job, per_job, across)

    def table(self, job_id: str) -> JobRates:
        """One job's rates: its own measurements, its servers' factors else the median's."""
        table = JobRates(self.cluster.gpu_types, self.reference_throughput)
        for r in self.by_job.get(job_id, []):
            table.add(r.layer, r.place, r.size, r.per_gpu)
        table.node_factor = {**self.across, **self.per_job.get(job_id, {})}
        return table


@dataclass(frozen=True)
class _Assumed:
    """What the replay assumes of each job, as :func:`build_world` documents its arguments."""

    profiled: bool
    restart_cost_s: float | None
    launch_s: Mapping[str, float]
    grace_s: float | None
    profiled_jobs: frozenset[str] | None
    excluded_types: Mapping[str, frozenset[str]]
    profile_phases_s: Mapping[str, float]

    def model(
        self,
        j: ReplayJob,
        name: str,
        table: JobRates,
        cluster: Cluster,
        reference_throughput: float,
    ) -> AssumedModel:
        """The job as its own model: measured rates, restart and launch costs, limits."""
        measured = {t: table.type_rate(t, 1) for t in cluster.gpu_types}
        table_rate = {t: reference_throughput * g.speed for t, g in cluster.gpu_types.items()}
        grace_s = self.grace_s
        return AssumedModel(
            name=name,
            params=max(j.params, 0.0),
            batch_size=max(j.batch_size, 1),
            throughput=measured,
            assumed=measured if self.profiled else table_rate,
            # without profiling hopsd knew no phase times: the type table until measured
            phases_known=self.profiled,
            # what its restarts cost, measured whole by hopsd; else the window's median
            restore_s=j.restart_s if j.restart_s is not None else self.restart_cost_s,
            launch_s=self.launch_s.get(j.job_id, 0.0),
            priced_as=(
                LearnedRestart(j.startup_s, j.checkpoint_s, grace_s, j.restart_s, j.model_restart_s)
                if grace_s is not None
                else None
            ),
            profiled=self.profiled_jobs is None or j.job_id in self.profiled_jobs,
            profile_s=self.profile_phases_s.get(j.job_id),
            max_gpus={t: 0 for t in self.excluded_types.get(j.job_id, frozenset())},
        )


def _trace_spec(
    j: ReplayJob, model: str, demands: tuple[int, ...], size: float, origin: float
) -> JobSpec:
    """The live job in the trace: under its Slurm id, arriving when it was submitted."""
    return JobSpec(
        job_id=str(j.slurm_job_id) if j.slurm_job_id is not None else j.job_id,
        submit_time=round(j.submit_time - origin, 3),
        demands=demands,
        total_samples=size,
        model=model,
        user=j.user,
        batch_size=max(j.batch_size, 1),
    )


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
    profile_phases_s: Mapping[str, float] | None = None,
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
    ``profile_phases_s``: per job, how long its profiling phase really lasted
    (:func:`hopsd.ledger.restarts.profiling_phases_s`): where the replay profiles, the
    job is profiled that long; a job not in it for the engine's ``profile_s``.
    """
    cluster = build_cluster(nodes, types, node_types or {}, inventory or {})
    done = [j for j in jobs if j.state == "done" and j.end_time is not None]
    if not done:
        raise InvalidInputError(
            f"no finished job in the window ({len(jobs)} job(s) submitted in it)"
        )
    replayed, skipped = _replayed(jobs)
    largest = largest_config(cluster)
    origin = min(j.submit_time for j, _ in replayed)
    measured = _Measured.of(rates, cluster, reference_throughput)
    assumed = _Assumed(
        profiled,
        restart_cost_s,
        launch_s or {},
        grace_s,
        profiled_jobs,
        excluded_types or {},
        profile_phases_s or {},
    )
    models: dict[str, ModelSpec] = {}
    tables: dict[str, JobRates] = {}
    specs: list[JobSpec] = []
    live: dict[str, ReplayJob] = {}
    load_only: dict[str, str] = {}
    for j, size in replayed:
        demands = runnable(j.demands, largest)
        if not demands:
            skipped["too_large"] = skipped.get("too_large", 0) + 1
            continue
        name = model_of(j.job_id)
        tables[name] = table = measured.table(j.job_id)
        models[name] = assumed.model(j, name, table, cluster, reference_throughput)
        specs.append(_trace_spec(j, name, demands, size, origin))
        trace_id = specs[-1].job_id
        if j.state == "done" and j.end_time is not None:
            live[trace_id] = j
        else:
            load_only[trace_id] = j.state
    if not live:
        raise InvalidInputError("no finished job of the window fits the cluster")
    truth = ReplayTruth(cluster, models, rates=tables)
    return ReplayWorld(truth, specs, live, origin, skipped, load_only)


def round_times_s(round_times: Sequence[float], origin: float) -> tuple[float, ...]:
    """hopsd's full rounds of the window in trace time: the replay's rounds fall on them.

    hopsd's rounds fall where its clock put them (the first tick at least a round
    length after the last one), not at the window's first arrival nor at exact
    round lengths; a replay whose rounds fall elsewhere plans at other instants
    than hopsd did, and its jobs' fates diverge from the first round on (a round
    a second before a job ends moves what a round a second later would not).
    """
    return tuple(t - origin for t in sorted(round_times) if t >= origin)


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
    notice_grace_s: float = 0.0,
) -> EngineConfig:
    """The simulated world of a replay: hopsd's settings, no noise (the truth was measured).

    ``adoption_s`` stands for the delay before hopsd adopts a new job (half a queue
    refresh on average); ``profile_s`` for its profiling phase where hopsd profiles
    (its runs train the job on one GPU of each type in turn, as live) for the jobs
    whose own phase was not measured (:func:`build_world`'s ``profile_phases_s``).
    ``notice_grace_s`` (hops.conf's checkpoint grace): moves and preemptions are
    enacted under a notice as hopsd enacts them, the job in flight meanwhile, its
    GPUs and its target reserved by the step (:func:`hopsd.core.reserve.reserve`).
    """
    return EngineConfig(
        settings=settings,
        profile_s=profile_s,
        adoption_s=adoption_s,
        profile_noise=0.0,
        measure_noise=0.0,
        measure_after_s=measure_after_s,
        spare_guard_s=spare_guard_s,
        notice_grace_s=notice_grace_s,
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
        "notice_grace_s": config.notice_grace_s,
        "live": live_figures(world),
        "policies": figures,
        "policy_settings": {name: settings_table(own[name]) for name in policies},
        "jobs": per_job,
    }
    if out_dir is not None:
        _write_outputs(Path(out_dir), out, world.jobs, records, results)
    return out
