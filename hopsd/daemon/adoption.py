"""Which Slurm jobs hopsd adopts, and under which ledger id.

A hops-tagged held job becomes a ledger job only through :func:`check_tag`,
which trusts Slurm for the owner and the core's admission for the demands.
Slurm job ids repeat across cluster incarnations, so a ledger row is matched to
the job Slurm now shows under its id only when :func:`reuse_reason` finds
nothing that rules the match out. The reconciler (:mod:`hopsd.daemon.reconcile`)
applies these rules inside its transaction; they live here so they can be read
and tested without it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from hopsd.core.admission import admit
from hopsd.daemon.problems import InputProblems
from hopsd.daemon.views import ObservedJob, ObservedNode
from hopsd.ledger.records import JobRecord, JobSpec, JobState, LrRule, TagStatus
from hopsd.ledger.unit import Unit
from hopsd.userdata import slurm_field_problem

#: Why a row was retired: its Slurm id now names another job.
REUSED = "slurm job id reused"

SUBMIT_SLACK_S = 1.0

#: Jobs adopted under one savepoint (:func:`adopt_together`).
ADOPT_BATCH = 250


def job_id_of(slurm_id: int) -> str:
    """Ledger id of a Slurm job: its id as text (hops adopts each Slurm job once).

    A job whose Slurm id an earlier cluster incarnation already used gets a
    suffixed id instead (:meth:`hopsd.daemon.reconcile.Reconciler._free_id`).
    """
    return str(slurm_id)


def reuse_reason(row: JobRecord, job: ObservedJob) -> str:
    """Why ``job`` cannot be the Slurm job ``row`` recorded, or "" when it may be.

    Different owners, or a restart count that went down (Slurm's only grows),
    settle it. Submit times are compared only while neither has restarted:
    Slurm resets a job's submit time when it requeues it.
    """
    if job.user and row.user and job.user != row.user:
        return f"owner {job.user!r}, the ledger's job belongs to {row.user!r}"
    recorded = row.restarts or 0
    if job.restarts < recorded:
        return f"restart count {job.restarts}, the ledger's job had {recorded}"
    comparable = job.restarts == 0 and recorded == 0 and job.submit_time and row.submit_time
    if comparable and abs(job.submit_time - row.submit_time) > SUBMIT_SLACK_S:
        return (
            f"submitted at {job.submit_time:.0f}, "
            f"the ledger's job was submitted at {row.submit_time:.0f}"
        )
    return ""


#: What a job's owner is told when they edit its Slurm comment after adoption.
TAG_CHANGED = (
    "the job's hops tag (Slurm comment) was changed after hopsd adopted it; the change is "
    "ignored: the job keeps the demands, size and GPU types it was adopted with"
)


def entry_partitions(nodes: Sequence[ObservedNode], managed: Collection[str]) -> frozenset[str]:
    """Partitions a hops job may be submitted to: those sharing a node with the managed
    ones (the managed partitions themselves, and e.g. a site's default ``all`` or the
    partition ``contrib/job_submit.lua`` takes over).

    hops places a job it adopts through its managed partitions, whatever partition
    it was submitted to. A partition with none of their nodes is the centre's
    alone (other GPUs, CPUs): a job sent there was sent past hops, and is left to
    Slurm, never adopted, held nor requeued.
    """
    return frozenset(p for n in nodes if n.name in managed for p in n.partitions)


def outside_managed(job: ObservedJob, entry: Collection[str]) -> str:
    """Why a tagged job is left to Slurm ("" when it may be adopted): every partition it
    asked for (Slurm lists them comma-separated) shares no node with the managed ones."""
    asked = [p for p in job.partition.split(",") if p]
    if not asked or any(p in entry for p in asked):
        return ""
    return (
        f"submitted to partition {job.partition}, which shares no node with the partitions "
        "hops manages ([slurm] partitions); left to Slurm"
    )


def check_tag(
    job: ObservedJob,
    largest_config: int,
    max_demand: int,
    per_type: Mapping[str, int] | None = None,
) -> tuple[JobSpec | None, str]:
    """A job spec from a tagged held job, or None with the reason it is refused.

    The owner comes from Slurm (munge-authenticated), never from the tag. Demand
    options no configuration of the managed partitions can hold are dropped; a
    job none of whose options fit, or asking above the admin's cap, is refused.
    """
    tag = job.tag
    if tag is None:
        return None, job.tag_error or "not a hops tag"
    if not job.user:
        return None, "Slurm reports no owner for the job"
    fields = slurm_field_problem(job.user, job.account, job.name, "")
    if fields:
        return None, fields
    admission = admit(
        tag.demands,
        tag.total_samples,
        tag.batch_size,
        largest_config=largest_config,
        max_demand=max_demand,
        per_type=per_type,
        types=tag.types,
        exclude_types=tag.exclude_types,
    )
    if not admission.admitted:
        return None, admission.refusal
    demands = admission.demands
    lr_rule = LrRule(tag.lr_scale)
    per_demand = len(tag.lr) == len(tag.demands) and len(tag.lr) > 1
    spec = JobSpec(
        id=job_id_of(job.slurm_id),
        user=job.user,
        account=job.account,
        slurm_job_id=job.slurm_id,
        demands=demands,
        total_samples=float(tag.total_samples),
        batch_size=tag.batch_size,
        model_name=tag.model,
        params=float(tag.params),
        lr=tag.lr[0] if tag.lr else None,
        lr_rule=lr_rule,
        lr_by_demand=dict(zip(tag.demands, tag.lr, strict=True)) if per_demand else None,
        submit_time=job.submit_time,
        tag_status=TagStatus.VALID,
        state=JobState.QUEUED,
        adopted_tag=job.comment,
        name=job.name,
    )
    return spec, ""


def in_savepoint(unit: Unit, work: Callable[[], None]) -> bool:
    """``work()`` under a SAVEPOINT: if it fails, none of its writes remain.

    Adopting a job may first retire an older row under the same Slurm id; the
    two stand or fall together. Adoption is rare (once per job), so the
    savepoint's flush costs nothing per tick.
    """
    with unit.savepoint():
        work()
    return True


def free_id(unit: Unit, slurm_id: int, taken: set[str]) -> str:
    """``str(slurm_id)``, or ``<slurm_id>-<n>`` when a retired row holds that id
    (``taken``: the plain ids the ledger held when adoption began; no two jobs of
    one adoption share a Slurm id, so no other can have taken it since)."""
    base = job_id_of(slurm_id)
    if base not in taken:
        return base
    candidate, n = base, 1
    while unit.job_id_taken(candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def adopt_together(
    unit: Unit,
    chunk: Sequence[ObservedJob],
    adopt: Callable[[ObservedJob, JobRecord | None], None],
    report: Sequence[list[Any]],
    problems: InputProblems,
    written: Callable[[], None] = lambda: None,
) -> bool:
    """Adopt jobs the ledger has never seen under one savepoint (one flush, not one per
    job: a queue of thousands is adopted in seconds), ``written()`` last (what the
    adoptions left for the batch to write at once); False, with nothing of them left
    (``report``'s lists and rows cut back), when any one failed."""
    counts = [len(said) for said in report]
    try:
        with unit.savepoint():
            for job in chunk:
                adopt(job, None)
            written()
        return True
    except Exception as exc:
        if not problems.contained(exc):
            raise
    for said, count in zip(report, counts, strict=True):
        del said[count:]  # the report's lists, as they were before the batch
    unit.forget({job_id_of(j.slurm_id) for j in chunk})
    return False
