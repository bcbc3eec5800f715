"""What a tick writes beside a round's decision: its note, which allocation changes are
history, the estimate behind each placement, and which ended jobs still get a final LR.

Kept apart from :mod:`hopsd.daemon.tick` so the tick reads as observe, decide, record,
enact; these are the small rules of what the record says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial

from hopsd.core.errors import HopsError
from hopsd.core.estimator import Estimator
from hopsd.core.model import Job, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.daemon.decide import Action
from hopsd.daemon.problems import InputProblems
from hopsd.ledger.records import AllocationChange, AllocationReason, JobRecord, JobUpdate, core_job
from hopsd.ledger.unit import Unit


def ended_jobs(rows: Mapping[str, JobRecord], scored: Mapping[str, float]) -> list[Job]:
    """The core jobs of rows the step did not score (jobs that just ended), where possible."""
    out: list[Job] = []
    for job_id, row in rows.items():
        if job_id in scored:
            continue
        try:
            out.append(core_job(row))
        except HopsError:
            continue  # a row that no longer reads as a job: no final LR
    return out


def worth_recording(change: AllocationChange, kind: str) -> bool:
    """Keeps are history only at full rounds; fragments record what they change."""
    return kind == "round" or change.reason != AllocationReason.KEEP


def round_note(kind: str, actions: Sequence[Action], plan: Plan) -> str:
    summary = {
        "kind": kind,
        "actions": [{"job": a.job_id, "slurm": a.slurm_id, "do": a.describe()} for a in actions],
        "notes": list(plan.notes)[:5],
    }
    return json.dumps(summary, separators=(",", ":"))


def record_estimate_sources(
    unit: Unit,
    planned: Snapshot,
    actions: Sequence[Action],
    settings: Settings,
    problems: InputProblems,
) -> None:
    """Keep, per placed job, which layer of the estimator priced its placement (``EST``
    in ``hops status``); a job the estimator cannot price is that job's problem."""
    estimator = Estimator(planned.cluster, planned.store, settings)
    jobs = {j.id: j for j in planned.jobs}
    sources = []
    for row in unit.jobs([a.job_id for a in actions if a.config]).values():
        config = next(a.config for a in actions if a.job_id == row.id)
        if config is not None and row.id in jobs:
            estimate = partial(estimator.throughput, jobs[row.id], config)
            got = problems.guard(row.slurm_job_id or 0, "planning", estimate)
            if got is not None:
                sources.append(JobUpdate(row.id, estimate_source=got.source))
    unit.update_jobs(sources)
