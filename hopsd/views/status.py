"""The document behind ``hops status --json`` and hopsd's status page: jobs, GPU types, leader.

One builder for both, so the page and the CLI can never disagree on a schema.
"""

from __future__ import annotations

import time
from typing import Any

from hopsd.config import HopsConfig
from hopsd.ledger.records import JobRecord, JobState
from hopsd.ledger.unit import Unit
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.port import SlurmNode
from hopsd.views.records import ACTIVE, job_record, raqlr_of, type_summaries


def _nodes(config: HopsConfig) -> tuple[list[SlurmNode], str | None]:
    from hopsd.slurm.factory import make_port

    try:
        port = make_port(
            config.slurm_backend,
            timeout_s=config.slurm_timeout_s,
            command_prefix=config.slurm_command_prefix,
        )
        return port.list_nodes(), None
    except (SlurmError, ValueError) as exc:
        return [], str(exc)


def _eta(job: JobRecord, now: float) -> float | None:
    """Seconds left at the job's observed rate since it first started (None if unknown)."""
    if job.state != JobState.RUNNING or job.service_gpu_s <= 0 or job.samples_done <= 0:
        return None
    if job.first_start_time is None:
        return None
    ran = max(now - job.first_start_time - job.wait_time, 1.0)
    rate = job.samples_done / ran
    return max(job.total_samples - job.samples_done, 0.0) / rate if rate > 0 else None


def status_payload(
    unit: Unit, config: HopsConfig, users: set[str] | None, window_h: float
) -> dict[str, Any]:
    """The ``--json`` document of ``hops status`` (stable schema, see README)."""
    now = time.time()
    rows = [r for r in unit.jobs_in_states(ACTIVE) if users is None or r.user in users]
    rows.sort(key=lambda r: (r.submit_time, r.slurm_job_id or 0))
    nodes, slurm_error = _nodes(config)
    queued = sum(1 for r in rows if r.state != JobState.RUNNING)
    lrs = unit.finished_latency_ratios(now - window_h * 3600)
    return {
        "jobs": [job_record(r, now, _eta(r, now)) for r in rows],
        "cluster": [
            s.as_json() for s in type_summaries(nodes, config.partitions, config.node_types, queued)
        ],
        "raqlr": round(raqlr_of(lrs), 3),
        "raqlr_window_h": window_h,
        "slurm_error": slurm_error,
        "leader": _leader(unit, now),
    }


def _leader(unit: Unit, now: float) -> dict[str, Any]:
    """Which hopsd leads (holds the unexpired lease), since when, under which fencing token."""
    info = unit.lease_info()
    if info is None:
        return {"holder": None, "since": None, "expires_at": None, "token": 0}
    holder = info.holder if info.held_at(now) else None
    return {
        "holder": holder,
        "since": info.acquired_at if holder else None,
        "expires_at": info.expires_at,
        "token": info.token,
    }
