"""The input of one scheduling round: what the cluster and the queue look like now."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from hopsd.core.errors import InvalidInputError
from hopsd.core.fairshare import Usage
from hopsd.core.model import Cluster, Job, NodeClosing
from hopsd.core.profiling import Profilee
from hopsd.core.throughput import InMemoryThroughputStore, ThroughputStore


@dataclass(frozen=True)
class InFlight:
    """A job whose decided actions are not all taken yet (see :mod:`hopsd.core.reserve`).

    ``target`` names the GPUs per node its pending placement will take;
    ``runs_on`` says it still runs on its current GPUs (it was given notice and
    its grace is not over, so it has not been requeued yet). ``until`` is when
    that grace ends (None: not known, or no notice): the reserve stage does not
    read it; a forecast lands the work then, not at once.
    """

    job_id: str
    target: tuple[tuple[str, int], ...] = ()
    runs_on: bool = False
    until: float | None = None


@dataclass(frozen=True)
class LaunchFailure:
    """A run Slurm ended as it may end a launch that failed (see :func:`hopsd.core.act.relaunch`).

    ``tries`` counts the relaunches hops took already; ``released_by_hops``
    says the run was hops's doing (its last enacted change was hops's release).
    Whether the job is relaunched or ends is the act stage's to say.
    """

    job_id: str
    state: str
    start_time: float | None
    end_time: float | None
    tries: int = 0
    released_by_hops: bool = False


@dataclass(frozen=True)
class PendingJob:
    """A job Slurm shows pending, as the act stage's hold rule reads it
    (:func:`hopsd.core.act.hold`).

    ``held`` and ``reason`` are Slurm's (``JobHeldUser``: a hold its owner
    placed and may release); ``released_by_hops`` says the job's last enacted
    change was hops's own release (it waits for Slurm to launch it where hops
    put it, and must not be held again).
    """

    job_id: str
    held: bool
    reason: str = ""
    released_by_hops: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Everything a round needs, captured at one instant.

    ``now`` is passed in (the core never reads a clock). ``capacity`` is how many
    GPUs of each node hops may use (node size minus GPUs held by jobs hops does
    not manage, zero for drained nodes); missing nodes default to their size.
    ``pinned`` names running jobs that must keep their place in this plan (used
    by the fragment plans inside a round). ``finished_lrs`` are the latency
    ratios of recently finished jobs, for RAQLR. ``profiling`` lists the jobs in
    their profiling phase (not in ``jobs``: the profiling queue owns them, see
    :mod:`hopsd.core.profiling`); ``usage`` is the owners' decayed usage the
    step turns into fair-share factors (None: every factor stays as given).
    ``in_flight`` lists jobs whose decided actions are still being taken: the
    step's first stage (:func:`hopsd.core.reserve.reserve`) leaves them and the
    GPUs they hold or will take out of planning. ``listening`` names the jobs
    that can hear a checkpoint notice before a move or preemption (None: all;
    :mod:`hopsd.core.act`). ``unplanned`` names running jobs Slurm started without
    a hops decision (in hopsd: released by their owner before hops held them):
    the reserve stage keeps their GPUs busy and the act stage requeues them.
    ``launch_failures`` are runs Slurm ended as a failed launch ends (not jobs
    of ``jobs``: they run nowhere); the act stage relaunches them or lets them
    end, and the reserve stage drops those already in flight.
    ``closing`` names nodes that stop taking work (drained, or under a
    reservation that begins soon): :mod:`hopsd.core.closing` keeps new work off
    them and moves jobs that would not finish in time. ``pending`` lists hops jobs
    Slurm shows pending whose hold the act stage judges (in hopsd only: the
    jobs it has not asked to hold yet); the reserve stage drops those in flight.
    """

    now: float
    cluster: Cluster
    jobs: tuple[Job, ...]
    store: ThroughputStore = field(default_factory=InMemoryThroughputStore)
    capacity: Mapping[str, int] = field(default_factory=dict)
    pinned: frozenset[str] = frozenset()
    finished_lrs: tuple[float, ...] = ()
    profiling: tuple[Profilee, ...] = ()
    usage: Usage | None = None
    in_flight: tuple[InFlight, ...] = ()
    listening: frozenset[str] | None = None
    unplanned: frozenset[str] = frozenset()
    launch_failures: tuple[LaunchFailure, ...] = ()
    closing: Mapping[str, NodeClosing] = field(default_factory=dict)
    pending: tuple[PendingJob, ...] = ()

    def __post_init__(self) -> None:
        ids = [j.id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise InvalidInputError("a job id appears twice in the snapshot")
        flying = [f.job_id for f in self.in_flight]
        if len(set(flying)) != len(flying):
            raise InvalidInputError("a job is in flight twice in the snapshot")
        nodes = self.cluster.node_map()
        for node_id, cap in self.capacity.items():
            if node_id not in nodes:
                raise InvalidInputError(f"capacity given for unknown node {node_id!r}")
            if cap < 0 or cap > nodes[node_id].gpus:
                raise InvalidInputError(
                    f"capacity {cap} of node {node_id!r} outside 0..{nodes[node_id].gpus}"
                )
        unknown = sorted(n for n in self.closing if n not in nodes)
        if unknown:
            raise InvalidInputError(f"closing given for unknown nodes {unknown}")
        for job in self.jobs:
            if job.current is None:
                continue
            if job.current.gpu_type not in self.cluster.gpu_types:
                raise InvalidInputError(f"job {job.id!r} runs on unknown type")
            for node_id, _ in job.current.parts:
                if node_id not in nodes:
                    raise InvalidInputError(f"job {job.id!r} runs on unknown node {node_id!r}")

    def capacity_of(self, node_id: str) -> int:
        """GPUs of a node that hops may hand out this round."""
        if node_id in self.capacity:
            return self.capacity[node_id]
        return self.cluster.node(node_id).gpus

    @cached_property
    def queued(self) -> tuple[Job, ...]:
        """Jobs not running now (computed once: a step asks again and again)."""
        return tuple(j for j in self.jobs if j.current is None)

    @cached_property
    def running(self) -> tuple[Job, ...]:
        """Jobs running now (computed once, like :attr:`queued`)."""
        return tuple(j for j in self.jobs if j.current is not None)
