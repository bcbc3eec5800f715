"""What happened on the cluster in a time window, as plain records (for ``hops replay``).

The replay needs four things from the ledger: the jobs submitted in the window
(what users asked for and what they got), every throughput hops learned for
them (per GPU type and per server), the nodes their allocations named with
the most GPUs hops held on each at once, and the allocations themselves (to
measure what a restart really cost). Three queries, whatever the window;
the records carry no ORM state, so the simulator side never sees the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from hopsd.ledger.models import AllocationReason, AllocationRow, JobRow, ThroughputRow


@dataclass(frozen=True, slots=True)
class JobHistory:
    """One job as the ledger remembers it: the request and what it lived through."""

    job_id: str
    slurm_job_id: int | None
    user: str
    state: str
    submit_time: float
    first_start_time: float | None
    end_time: float | None
    demands: tuple[int, ...]
    total_samples: float
    samples_done: float
    batch_size: int
    model_name: str
    params: float
    wait_time: float
    restarts: int
    latency_ratio: float | None
    startup_s: float | None = None  # start to first iteration, as the job's probe reported
    checkpoint_s: float | None = None  # notice to checkpoint, as the job's probe reported
    restart_s: float | None = None  # a restart whole: decision to first iteration after it
    model_restart_s: float | None = None  # its model's, when the job was adopted
    adopted_tag: str = ""  # the tag it was adopted with, as Slurm's comment held it


@dataclass(frozen=True, slots=True)
class LearnedRate:
    """One learned per-GPU throughput of a job (``layer``/``place``/``size`` as in the ledger).

    ``layer`` is ``entity_agg`` | ``entity_dist`` | ``type_agg`` | ``type_dist``;
    ``place`` a node (entity) or a GPU type (type); ``size`` GPUs (aggregated) or
    nodes (distributed).
    """

    job_id: str
    layer: str
    place: str
    size: int
    per_gpu: float
    observations: int


@dataclass(frozen=True, slots=True)
class NodeSeen:
    """A node some allocation named: its GPU type and the most GPUs hops held there at once."""

    node: str
    gpu_type: str
    peak_gpus: int


@dataclass(frozen=True, slots=True)
class PlacementSeen:
    """One allocation row: a job started, kept, moved, preempted or ended at ``at``."""

    job_id: str
    reason: str
    gpu_type: str | None
    parts: tuple[tuple[str, int], ...]
    at: float


@dataclass(frozen=True, slots=True)
class LedgerHistory:
    jobs: tuple[JobHistory, ...]
    rates: tuple[LearnedRate, ...]
    nodes: tuple[NodeSeen, ...]
    placements: tuple[PlacementSeen, ...] = ()


def read_history(session: Session, since: float, until: float) -> LedgerHistory:
    """Jobs submitted in ``[since, until]``, their learned rates and the nodes they used."""
    rows = list(
        session.scalars(
            select(JobRow)
            .where(JobRow.submit_time >= since, JobRow.submit_time <= until)
            .order_by(JobRow.submit_time, JobRow.id)
        )
    )
    jobs = tuple(_job(r) for r in rows)
    ids = [j.job_id for j in jobs]
    rates: list[LearnedRate] = []
    allocs: list[AllocationRow] = []
    if ids:
        # One query each: the window's rows (the ledger keeps them after a job ends).
        rates = [
            LearnedRate(
                r.job_id,
                str(r.layer.value),
                r.place,
                int(r.size),
                float(r.per_gpu),
                int(r.observations),
            )
            for r in session.scalars(select(ThroughputRow).where(ThroughputRow.job_id.in_(ids)))
        ]
        allocs = list(
            session.scalars(
                select(AllocationRow)
                .where(AllocationRow.job_id.in_(ids))
                .order_by(AllocationRow.at, AllocationRow.id)
            )
        )
    placements = tuple(
        PlacementSeen(
            a.job_id,
            str(a.reason.value),
            a.gpu_type,
            tuple((str(n), int(g)) for n, g in (a.parts or [])),
            float(a.at),
        )
        for a in allocs
    )
    return LedgerHistory(jobs, tuple(rates), tuple(peak_nodes(allocs)), placements)


def _job(r: JobRow) -> JobHistory:
    return JobHistory(
        job_id=r.id,
        slurm_job_id=r.slurm_job_id,
        user=r.user,
        state=str(r.state.value),
        submit_time=float(r.submit_time),
        first_start_time=r.first_start_time,
        end_time=r.end_time,
        demands=tuple(int(d) for d in r.demands),
        total_samples=float(r.total_samples),
        samples_done=float(r.samples_done),
        batch_size=int(r.batch_size),
        model_name=r.model_name or "",
        params=float(r.params or 0.0),
        wait_time=float(r.wait_time or 0.0),
        startup_s=r.startup_s,
        checkpoint_s=r.checkpoint_s,
        restart_s=r.restart_s,
        model_restart_s=r.model_restart_s,
        restarts=int(r.restarts or 0),
        latency_ratio=r.latency_ratio,
        adopted_tag=r.adopted_tag or "",
    )


def peak_nodes(allocs: Sequence[AllocationRow]) -> list[NodeSeen]:
    """Replay the allocation history in time order; the peak GPUs held per node.

    A start, keep or move sets a job's placement; a preempt or end clears it.
    The peak is a lower bound of the node's GPUs (hops never held more than it had).
    """
    holding: dict[str, dict[str, int]] = {}
    peak: dict[str, int] = {}
    kind: dict[str, str] = {}
    # Rows of one decision share their time and are written start-first, preempt-last:
    # the peak is taken once a whole decision is applied, never half-way through.
    for index, a in enumerate(allocs):
        holding.pop(a.job_id, None)
        if a.reason not in (AllocationReason.PREEMPT, AllocationReason.END) and a.parts:
            held: dict[str, int] = {}
            for node, gpus in a.parts:
                held[str(node)] = held.get(str(node), 0) + int(gpus)
                if a.gpu_type:
                    kind[str(node)] = a.gpu_type
            holding[a.job_id] = held
        if index + 1 < len(allocs) and allocs[index + 1].at == a.at:
            continue
        in_use: dict[str, int] = {}
        for parts in holding.values():
            for node, gpus in parts.items():
                in_use[node] = in_use.get(node, 0) + gpus
        for node, gpus in in_use.items():
            peak[node] = max(peak.get(node, 0), gpus)
    return [NodeSeen(n, kind.get(n, ""), peak[n]) for n in sorted(peak)]
