"""Assemble the core's Snapshot from ledger records, observed Slurm jobs and fair shares.

A hops job is shown to the planner as *running* when Slurm runs it on managed
nodes, as *starting* (running, and pinned) when hops released it and Slurm has
not launched it yet, and as *queued* when it waits held. Anything else (a job
completing, running where hops did not put it, or in its profiling runs, which
the profiling queue owns) is left out, and its GPUs count as occupied. A
released job Slurm cannot launch where hops put it (another job took the GPUs,
the node went down: :func:`~hopsd.daemon.snapshot_builder.crowded_out`) is
queued again: those GPUs are not hops's, and the job is placed anew.

Fair-share factors are the scheduling step's to set, from the usage the tick
adds to the snapshot (:func:`hopsd.core.fairshare.apply_fair_share`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from hopsd.config import HopsConfig
from hopsd.core.admission import runnable
from hopsd.core.capacity import held_gpus, node_sizes
from hopsd.core.gains import hears_notice, restart_price_s
from hopsd.core.model import Configuration, Job, NodeClosing
from hopsd.core.snapshot import Snapshot
from hopsd.core.throughput import ThroughputStore
from hopsd.daemon.closings import closings
from hopsd.daemon.decide import JobHandle
from hopsd.daemon.snapshot_builder import (
    ClusterView,
    adopted_tag,
    build_cluster_view,
    crowded_out,
    observed_config,
    with_tag_rules,
)
from hopsd.daemon.views import RUNNING, Observation
from hopsd.ledger.records import JobRecord, JobState, SlurmFacts, TagStatus, core_job
from hopsd.slurm.parse_reservations import SlurmReservation

log = logging.getLogger("hopsd.assemble")
Guard = Callable[[int, str, Callable[[], Any]], Any]


@dataclass(frozen=True)
class Assembled:
    snapshot: Snapshot
    view: ClusterView
    handles: Mapping[str, JobHandle]
    starting: frozenset[str]
    #: jobs whose intent chains still wait (a notice's grace, a requeue not yet settled)
    waiting: frozenset[str] = frozenset()
    #: released jobs this observation shows crowded out (the next one confirms them)
    crowded: frozenset[str] = frozenset()


def _fits(config: Configuration, view_nodes: Mapping[str, int]) -> bool:
    return all(node in view_nodes and gpus <= view_nodes[node] for node, gpus in config.parts)


def assemble(
    rows: Sequence[JobRecord],
    obs: Observation,
    config: HopsConfig,
    targets: Mapping[str, Configuration],
    store: ThroughputStore,
    now: float,
    guard: Guard | None = None,
    reservations: Sequence[SlurmReservation] = (),
    crowded_before: frozenset[str] | None = None,
) -> Assembled:
    """Build the planner's input; see the module docstring for the job classes.

    With ``guard`` (:meth:`hopsd.daemon.problems.InputProblems.guard`), a job
    whose row cannot be turned into a core job is left out of this tick's
    plan instead of failing the whole plan. Drained nodes and ``reservations``
    give the snapshot's closing nodes (:mod:`hopsd.daemon.closings`).
    ``crowded_before`` is the last observation's :attr:`Assembled.crowded`: a
    released job is planned again only when both show it crowded out (None:
    one observation is enough).
    """
    observed = obs.job_map()
    plain = build_cluster_view(obs.nodes, config, {})
    sizes = {n.id: n.gpus for n in plain.cluster.nodes}
    jobs: list[Job] = []
    handles: dict[str, JobHandle] = {}
    starting: set[str] = set()
    held_running: dict[str, int] = {}
    no_preempt: set[str] = set()
    for row in rows:
        seen = observed.get(int(row.slurm_job_id or -1))
        if seen is None or row.tag_status != TagStatus.VALID:
            continue
        if row.state == JobState.PROFILING:
            continue  # the profiling queue's; GPUs it holds count as occupied
        current: Configuration | None = None
        if seen.state == RUNNING:
            current = observed_config(seen, plain.cluster)
            if current is None:
                continue
            for node, gpus in seen.nodes.items():
                held_running[node] = held_running.get(node, 0) + gpus
        elif seen.pending and not seen.held:
            current = targets.get(row.id)
            if current is None or not _fits(current, sizes):
                continue
            starting.add(row.id)
        elif not (seen.pending and seen.held):
            continue
        ran = max(now - seen.start_time, 0.0) if seen.state == RUNNING and seen.start_time else 0.0
        restart_s = restart_price_s(
            row.checkpoint_s, row.startup_s, config.checkpoint_grace_s, row.restarts, ran,
            config.restart_penalty_s, whole_s=row.restart_s, model_s=row.model_restart_s,
        )  # fmt: skip
        build = partial(core_job, row, SlurmFacts(current, restart_s, seen.time_limit_s, ran))
        core: Job | None = build() if guard is None else guard(seen.slurm_id, "planning", build)
        if core is None:
            continue  # this job sits this tick out; the others are planned
        tag = adopted_tag(row, seen)
        jobs.append(with_tag_rules(core, tag, plain.cluster))
        if tag is not None and tag.no_preempt and seen.state == RUNNING:
            no_preempt.add(row.id)
        was_requeued = JobState(row.state) in (JobState.PREEMPTED, JobState.REQUEUED)
        handles[row.id] = JobHandle(
            int(row.slurm_job_id or 0), seen.restarts, was_requeued, seen.cpus_per_gpu
        )
    jobs, crowded = _replan_crowded_out(jobs, handles, starting, obs, held_running, crowded_before)
    view = build_cluster_view(obs.nodes, config, held_running)
    closing = closings(obs.nodes, reservations, sizes, config, now)
    snapshot, view = _snapshot(view, jobs, store, now, starting | no_preempt, closing)
    # only jobs whose probe has reported can take a checkpoint notice (hopsd.core.act)
    listening = frozenset(r.id for r in rows if hears_notice(r.startup_s))
    snapshot = dataclasses.replace(snapshot, listening=listening)
    return Assembled(snapshot, view, handles, frozenset(starting), crowded=crowded)


def _replan_crowded_out(
    jobs: list[Job],
    handles: dict[str, JobHandle],
    starting: set[str],
    obs: Observation,
    held_running: Mapping[str, int],
    crowded_before: frozenset[str] | None,
) -> tuple[list[Job], frozenset[str]]:
    """Released jobs whose GPUs another job took before Slurm launched them
    (:func:`crowded_out`) hold nothing: they are planned again, as released jobs
    (``starting`` and ``handles`` are updated in place). Also returns the jobs
    this observation shows crowded out.

    The queue is read before the nodes, so a released job Slurm launches
    between the two reads is pending in one and holds its GPUs in the other:
    it looks crowded out of its own GPUs. Planned again, it would be held
    while it runs and its new placement refused. A real crowding lasts (the
    other job runs on, the node stays down), a skew of the two reads does not:
    with ``crowded_before``, only jobs both observations show crowded out are
    planned again. One seen so only now sits this tick out: neither planned
    again nor counted on GPUs another job may hold.
    """
    seen_now = frozenset(
        crowded_out(
            {j.id: j.current for j in jobs if j.id in starting and j.current is not None},
            obs.nodes,
            held_running,
        )
    )
    crowded = seen_now if crowded_before is None else seen_now & crowded_before
    if not seen_now:
        return jobs, seen_now
    if crowded:
        log.info("event=start-crowded-out jobs=%s", ",".join(sorted(crowded)))
    starting -= seen_now
    for job_id in crowded:
        handles[job_id] = dataclasses.replace(handles[job_id], released=True)
    replanned = [
        dataclasses.replace(j, current=None) if j.id in crowded else j
        for j in jobs
        if j.id in crowded or j.id not in seen_now
    ]
    return replanned, seen_now


def _snapshot(
    view: ClusterView,
    jobs: Sequence[Job],
    store: ThroughputStore,
    now: float,
    pin: set[str],
    closing: Mapping[str, NodeClosing],
) -> tuple[Snapshot, ClusterView]:
    """The planner's snapshot: capacity never below what hops jobs hold, the jobs some
    configuration can hold, and ``pin`` (starting, or not to be preempted) pinned."""
    capacity = _make_room(view, jobs)
    view = ClusterView(view.cluster, view.partition_of, capacity)
    largest = view.largest_config()
    jobs = [j for j in jobs if runnable(j.demands, largest)]
    snapshot = Snapshot(
        now=now,
        cluster=view.cluster,
        jobs=tuple(jobs),
        store=store,
        capacity=capacity,
        pinned=frozenset(s for s in pin if any(j.id == s for j in jobs)),
        closing=closing,
    )
    return snapshot, view


def _make_room(view: ClusterView, jobs: Sequence[Job]) -> dict[str, int]:
    """Capacity never below what hops jobs already hold or were released onto."""
    held = held_gpus(j.current for j in jobs if j.current is not None)
    sizes = node_sizes(view.cluster)
    return {n: min(max(cap, held.get(n, 0)), sizes[n]) for n, cap in view.capacity.items()}
