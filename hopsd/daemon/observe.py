"""Observe: one batched jobs query and one nodes query per tick, never one call per job."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hopsd.daemon.views import Observation, ObservedJob, ObservedNode
from hopsd.slurm.port import AccountingRecord, SlurmJob, SlurmNode, SlurmPort


def job_view(job: SlurmJob) -> ObservedJob:
    return ObservedJob(
        slurm_id=job.job_id,
        user=job.user,
        account=job.account,
        state=job.state,
        name=job.name,
        comment=job.comment,
        held=job.held,
        reason=job.reason,
        partition=job.partition,
        nodes=dict(job.gpus_by_node),
        restarts=job.restarts,
        submit_time=job.submit_time or 0.0,
        start_time=job.start_time or 0.0,
        end_time=job.end_time or 0.0,
        tag=job.tag,
        tag_error=job.tag_error,
        work_dir=job.work_dir,
        time_limit_s=job.time_limit_s,
        cpus_per_gpu=job.cpus_per_gpu,
        qos=job.qos,
        ran_on=tuple(job.nodes),
    )


def node_view(node: SlurmNode) -> ObservedNode:
    return ObservedNode(
        name=node.name,
        gpu_type=node.gpu_type or "",
        gpus=node.gpus_total,
        gpus_used=node.gpus_alloc,
        partitions=node.partitions,
        usable=node.usable,
        state=node.state,
    )


def accounting_view(record: AccountingRecord) -> ObservedJob:
    """A job that left the queue, as the accounting database remembers its end."""
    return ObservedJob(
        slurm_id=record.job_id,
        user=record.user,
        account="",
        state=record.state,
        partition=record.partition,
        start_time=record.start_time or 0.0,
        end_time=record.end_time or 0.0,
        exit_code=record.exit_code,
        ran_on=tuple(record.nodes),
    )


def observe(port: SlurmPort, now: Callable[[], float]) -> Observation:
    """Both queries; raises the port's ``SlurmUnavailableError`` when slurmctld is away."""
    jobs = read_queue(port)
    nodes = port.list_nodes()
    return Observation(
        at=now(),
        jobs=tuple(job_view(j) for j in jobs),
        nodes=tuple(node_view(n) for n in nodes),
    )


def read_queue(port: SlurmPort) -> list[SlurmJob]:
    """The jobs through the port's narrow read where it has one (the CLI's ``list_queue``).

    The narrow read carries every field a tick reads at a fraction of the full
    read's cost on a large queue; a backend without one is read in full.
    """
    narrow = getattr(port, "list_queue", None)
    if callable(narrow):
        jobs: list[SlurmJob] = narrow()
        return jobs
    return port.list_jobs()


def final_states(port: SlurmPort, slurm_ids: Sequence[int]) -> dict[int, ObservedJob]:
    """Accounting records of jobs gone from the queue, in one call (empty list: none asked)."""
    if not slurm_ids:
        return {}
    return {r.job_id: accounting_view(r) for r in port.accounting(list(slurm_ids))}
