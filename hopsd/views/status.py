"""The document behind ``hops status --json`` and hopsd's status page: jobs, refusals,
GPU types, the daemon's state and who leads.

One builder for both, so the page and the CLI can never disagree on a schema.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

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
from hopsd.views.filters import JobFilter
from hopsd.views.joblist import DaemonState, daemon_state, job_record, queue_order
from hopsd.views.records import raqlr_of, type_summaries


class StatusReads(Protocol):
    """The ledger reads the document needs: the unit of work (hopsd's page) has them, and so
    has the CLI's driver-only reader (:class:`hopsd.ledger.reader.Reader`)."""

    def job_lines(
        self, states: Iterable[JobState], users: Users = None, slurm_ids: SlurmIds = None
    ) -> Sequence[ForeseenLine]: ...

    def queue_entries(self) -> list[QueueEntry]: ...

    def queue_length(self) -> int: ...

    def finished_latency_ratios(self, since: float) -> list[float]: ...

    def lease_info(self) -> LeaseInfo | None: ...

    def latest_round(self) -> RoundInfo | None: ...

    def refusals(self, users: Iterable[str] | None = None) -> list[RefusalRecord]: ...


if TYPE_CHECKING:  # the port is imported where the nodes are listed, on its own thread
    from hopsd.slurm.port import SlurmNode

    Listed = tuple[list[SlurmNode], str | None]


class _NodesMeanwhile:
    """The nodes Slurm lists, asked for on a thread while the ledger is read: the
    listing (with the import of the Slurm port, 20 ms) runs while SQLite answers the
    read without Python's lock, and ``sinfo`` answers in a process of its own. An error
    the listing does not name (:func:`read_nodes`) is raised where the nodes are taken."""

    def __init__(self, config: HopsConfig) -> None:
        self._listed: Listed | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(config,), daemon=True)
        self._thread.start()

    def _run(self, config: HopsConfig) -> None:
        try:
            self._listed = read_nodes(config)
        except BaseException as exc:  # handed to the caller in taken()
            self._error = exc

    def taken(self) -> Listed:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._listed is not None
        return self._listed


def _listing(config: HopsConfig, listed: Listed | None) -> Callable[[], Listed]:
    """What gives the nodes: those a caller already read, else Slurm's, asked for now."""
    if listed is None:
        return _NodesMeanwhile(config).taken
    known = listed
    return lambda: known


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


@dataclass(frozen=True)
class StatusView:
    """What ``hops status`` shows, read at one instant: the jobs' lines (oldest first) with
    their newest forecasts and queue positions, and the rest of its document.

    :meth:`as_json` is the document (``--json``, hopsd's page); the CLI prints its
    table from the lines themselves: through each job's document, 12,000 rows cost
    0.11 s against 0.064 s (a test holds the two equal).
    """

    now: float
    daemon: DaemonState
    jobs: Sequence[ForeseenLine]
    positions: Mapping[str, int]
    #: the document's other keys, in its order: refused, daemon, cluster, raqlr, ...
    rest: Mapping[str, Any]

    def job_records(self) -> list[dict[str, Any]]:
        """Each job in the document's schema (:func:`hopsd.views.joblist.job_record`)."""
        now, daemon, at = self.now, self.daemon, self.positions.get
        return [job_record(line, now, daemon, said, at(line.id)) for line, said in self.jobs]

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document of ``hops status`` (stable schema, see README)."""
        return {"jobs": self.job_records(), **self.rest}


def status_payload(
    unit: StatusReads,
    config: HopsConfig,
    wanted: JobFilter | None,
    window_h: float,
    listed: Listed | None = None,
) -> dict[str, Any]:
    """The ``--json`` document of ``hops status`` (see :func:`status_view`)."""
    return status_view(unit, config, wanted, window_h, listed).as_json()


def status_view(
    unit: StatusReads,
    config: HopsConfig,
    wanted: JobFilter | None,
    window_h: float,
    listed: Listed | None = None,
) -> StatusView:
    """What ``hops status`` shows of the jobs ``wanted`` keeps; ``listed``: the nodes a
    caller already read (:func:`read_nodes`), else they are read here."""
    wanted = wanted or JobFilter()
    nodes_listed = _listing(config, listed)
    now = time.time()
    daemon = daemon_state(unit.lease_info(), unit.latest_round(), now)
    states = ACTIVE_STATES if wanted.states is None else {JobState(s) for s in wanted.states}
    chosen = unit.job_lines(states, wanted.users, wanted.job_ids)
    nodes, slurm_error = nodes_listed()
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
    rest = {
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
    return StatusView(now, daemon, rows, position, rest)


def _queue(
    unit: StatusReads, chosen: Sequence[JobLine], wanted: JobFilter, states: Iterable[JobState]
) -> Sequence[JobLine | QueueEntry]:
    """Every active job not running, for the queue's positions and length: the lines just
    read when they hold every such job (``hops status --all``, or a user's status when
    the whole queue is the user's: counted, not read), else the narrow entries."""
    if set(states) >= NOT_RUNNING_STATES:
        read = [j for j in chosen if j.state in NOT_RUNNING_STATES]
        unfiltered = wanted.users is None and wanted.job_ids is None
        if unfiltered or len(read) == unit.queue_length():
            return read
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
