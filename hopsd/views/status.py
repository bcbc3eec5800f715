"""The document behind ``hops status --json`` and hopsd's status page: jobs, refusals,
GPU types, the daemon's state and who leads.

One builder for both, so the page and the CLI can never disagree on a schema.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from hopsd.config import HopsConfig
from hopsd.holder import local_dead
from hopsd.ledger.records import (
    ACTIVE_STATES,
    NOT_RUNNING_STATES,
    ForeseenLine,
    JobLine,
    JobState,
    LeaseInfo,
    QueueEntry,
    RefusalRecord,
    RoundInfo,
    SlurmIds,
    Users,
)
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.port import SlurmNode
from hopsd.views.filters import JobFilter
from hopsd.views.joblist import daemon_state, job_record, queue_order
from hopsd.views.records import raqlr_of, type_summaries


class StatusReads(Protocol):
    """The ledger reads the document needs: the unit of work (hopsd's page) has them, and so
    has the CLI's driver-only reader (:class:`hopsd.ledger.reader.Reader`)."""

    def job_lines(
        self, states: Iterable[JobState], users: Users = None, slurm_ids: SlurmIds = None
    ) -> Sequence[ForeseenLine]: ...

    def queue_entries(self) -> list[QueueEntry]: ...

    def finished_latency_ratios(self, since: float) -> list[float]: ...

    def lease_info(self) -> LeaseInfo | None: ...

    def latest_round(self) -> RoundInfo | None: ...

    def refusals(self, users: Iterable[str] | None = None) -> list[RefusalRecord]: ...


def read_nodes(config: HopsConfig) -> tuple[list[SlurmNode], str | None]:
    """The nodes Slurm lists now, or none and why Slurm did not answer."""
    from hopsd.slurm.factory import port_from_config

    try:
        port = port_from_config(config)
        return port.list_nodes(), None
    except (SlurmError, ValueError) as exc:
        return [], str(exc)


def _in_partitions(
    job: JobLine, partitions: frozenset[str] | None, node_parts: dict[str, tuple[str, ...]]
) -> bool:
    """Whether the job runs in one of ``partitions`` (a GPU type or a Slurm partition of its
    nodes); None keeps every job. Users, job ids and states are the ledger read's filters."""
    if partitions is None:
        return True
    places = {job.current_gpu_type or ""}
    for node, _ in job.current_parts or ():
        places.update(node_parts.get(node, ()))
    return bool(places & partitions)


def status_payload(
    unit: StatusReads,
    config: HopsConfig,
    wanted: JobFilter | None,
    window_h: float,
    listed: tuple[list[SlurmNode], str | None] | None = None,
) -> dict[str, Any]:
    """The ``--json`` document of ``hops status`` (stable schema, see README); ``listed``:
    the nodes a caller already read (:func:`read_nodes`), else they are read here."""
    wanted = wanted or JobFilter()
    now = time.time()
    daemon = daemon_state(unit.lease_info(), unit.latest_round(), now)
    states = ACTIVE_STATES if wanted.states is None else {JobState(s) for s in wanted.states}
    chosen = unit.job_lines(states, wanted.users, wanted.job_ids)
    nodes, slurm_error = listed if listed is not None else read_nodes(config)
    node_parts = {n.name: tuple(n.partitions) for n in nodes}
    waiting = _queue(unit, [line for line, _ in chosen], wanted, states)
    position = {j.id: k + 1 for k, j in enumerate(queue_order(waiting))}
    rows = [r for r in chosen if _in_partitions(r[0], wanted.partitions, node_parts)]
    rows.sort(key=lambda r: (r[0].submit_time, r[0].slurm_job_id or 0))
    queued = len(waiting)
    lrs = unit.finished_latency_ratios(now - window_h * 3600)
    refused = [
        {"job_id": r.slurm_job_id, "user": r.user, "reason": r.reason, "since": r.refused_at}
        for r in unit.refusals(wanted.users)
        if wanted.job_ids is None or r.slurm_job_id in wanted.job_ids
    ]
    return {
        "jobs": [job_record(r, now, daemon, said, position.get(r.id)) for r, said in rows],
        "refused": refused,
        "daemon": daemon.as_json(),
        "cluster": [
            s.as_json() for s in type_summaries(nodes, config.partitions, config.node_types, queued)
        ],
        "raqlr": round(raqlr_of(lrs), 3),
        "raqlr_window_h": window_h,
        "slurm_error": slurm_error,
        "leader": _leader(unit, now),
    }


def _queue(
    unit: StatusReads, chosen: Sequence[JobLine], wanted: JobFilter, states: Iterable[JobState]
) -> Sequence[JobLine | QueueEntry]:
    """Every active job not running, for the queue's positions and length: the lines just
    read when they hold every such job (``hops status --all``), else the narrow entries."""
    if wanted.users is None and wanted.job_ids is None and set(states) >= NOT_RUNNING_STATES:
        return [j for j in chosen if j.state in NOT_RUNNING_STATES]
    return unit.queue_entries()


def _leader(unit: StatusReads, now: float) -> dict[str, Any]:
    """Which hopsd leads (holds the unexpired lease), since when, under which fencing token."""
    info = unit.lease_info()
    if info is None:
        return {"holder": None, "since": None, "expires_at": None, "token": 0}
    holder = info.holder if info.held_at(now) and not local_dead(info.holder) else None
    return {
        "holder": holder,
        "since": info.acquired_at if holder else None,
        "expires_at": info.expires_at,
        "token": info.token,
    }
