"""The Slurm port: what hops needs from Slurm, independent of how it is reached.

Three backends implement :class:`SlurmPort` (the CLI, slurmrestd and pyslurm). Reads are
batched — one call for all jobs, one for all nodes — so a daemon tick costs the
same with ten jobs or ten thousand.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import hostlist

from hopsd.slurm.errors import (
    PlacementError,
    SlurmCommandError,
    SlurmTimeoutError,
    SlurmUnavailableError,
)
from hopsd.slurm.parse_limits import ShareRow, SlurmLimits
from hopsd.slurm.tag import HopsTag

log = logging.getLogger(__name__)
T = TypeVar("T")

HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin", "job_requeued_in_held_state"})
#: Job states in which a job holds the GPUs of its allocation.
GPU_HOLDING_STATES = frozenset({"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"})


def is_held(state: str, reason: str, priority: float | None, hold: bool = False) -> bool:
    """Whether a job is held: pending, and held by its flag, a priority of 0 or its reason
    (the one rule of every backend's reading of Slurm)."""
    return state == "PENDING" and (hold or priority == 0 or reason in HELD_REASONS)


UNUSABLE_NODE_STATES = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "NOT_RESPONDING",
        "FUTURE",
        "POWERED_DOWN",
        "POWER_DOWN",
        "UNKNOWN",
        "MAINTENANCE",
        "RESERVED",
        "INVALID_REG",
        "INVALID",
    }
)
FINISHED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
    }
)
"""Slurm states after which a job holds no GPUs and never runs again. SPECIAL_EXIT is
not one: Slurm keeps such a job queued and held, and it may be released."""


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as Slurm reports it.

    ``state`` is the base state (``PENDING``, ``RUNNING``, ``COMPLETED``...).
    ``gpus_by_node`` are the GPUs the job holds on each node (empty unless
    allocated). ``gres_request`` is what the job asks for (``gres:gpu:2`` per
    node or the per-job total). Times are epoch seconds or ``None``; for a
    running job ``end_time`` is its time-limit end. ``tag`` is the decoded
    hops tag, ``tag_error`` why a comment that claims to be one was refused.
    """

    job_id: int
    name: str
    user: str
    account: str
    state: str
    reason: str
    held: bool
    partition: str
    nodes: tuple[str, ...]
    gpus_by_node: tuple[tuple[str, int], ...]
    gpu_type: str | None
    gres_request: str
    submit_time: float | None
    start_time: float | None
    end_time: float | None
    comment: str
    tag: HopsTag | None
    tag_error: str | None
    restarts: int
    work_dir: str
    stdout_path: str
    priority: int | None = None
    flags: tuple[str, ...] = ()
    requested_nodes: tuple[str, ...] = ()
    #: Slurm's record of what the job's last run was allocated (``tres_alloc_str``).
    #: Slurm 22.05 clears it when a requeue stops a running job but keeps it when
    #: the requeue hits a job that had already ended (see ``requeue_check``).
    alloc_tres: str = ""
    stderr_path: str = ""
    #: ``26_1`` for a task of job array 26 (the form users type); empty otherwise.
    array_id: str = ""
    #: The tasks of an array not yet split into jobs of their own (``0-3``), on the array's record.
    array_tasks: str = ""
    #: The job's time limit in seconds (squeue's TimeLimit); None when unlimited or not yet
    #: set (22.05 sets a pending job's partition default only when it starts).
    time_limit_s: float | None = None
    #: CPUs the job asks for per GPU (``--cpus-per-gpu``); 0 when it asks none.
    cpus_per_gpu: int = 0
    #: The job's QOS (its GPU limits apply to it); empty when the backend does not say.
    qos: str = ""

    @property
    def gpus(self) -> int:
        return sum(g for _, g in self.gpus_by_node)

    @property
    def placement(self) -> dict[str, int]:
        return dict(self.gpus_by_node)

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node: its partitions, GPU type and GPU counts, and whether jobs may use it."""

    name: str
    partitions: tuple[str, ...]
    gpu_type: str | None
    gpus_total: int
    gpus_alloc: int
    state: str
    flags: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        words = {self.state, *self.flags}
        return not (words & UNUSABLE_NODE_STATES)

    @property
    def gpus_free(self) -> int:
        return max(self.gpus_total - self.gpus_alloc, 0) if self.usable else 0


@dataclass(frozen=True, slots=True)
class AccountingRecord:
    """The accounting database's view of a job (its latest run)."""

    job_id: int
    state: str
    exit_code: int
    signal: int
    start_time: float | None
    end_time: float | None
    elapsed_s: int
    nodes: tuple[str, ...]
    alloc_tres: Mapping[str, str]
    partition: str = ""
    user: str = ""

    @property
    def gpus(self) -> int:
        value = self.alloc_tres.get("gres/gpu", "0")
        return int(value) if value.isdigit() else 0


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run (incarnation) of a job in accounting, with the end of its batch script.

    ``state`` and ``end_time`` are the run's own: a run ended by a requeue reads
    ``REQUEUED``, and its ``end_time`` is the instant Slurm requeued it. The
    ``batch_*`` fields are those of the run's batch step, i.e. when and how the
    job's script itself ended (``batch_state`` is None while none is recorded).
    Comparing the two tells a requeue that stopped a running script from one that
    hit a job whose script had already finished on its own.
    """

    job_id: int
    state: str
    start_time: float | None
    end_time: float | None
    batch_state: str | None = None
    batch_exit_code: int = 0
    batch_signal: int = 0
    batch_end_time: float | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a held job should run: one partition and ``{node: gpus}``.

    Every node of a partition carries one GPU type, so the node list pins the
    type. Construction validates; ``uniform`` placements are enacted with a
    per-node ``Gres=gpu:M``, uneven ones with the job total ``TresPerJob``.
    """

    partition: str
    gpus_by_node: tuple[tuple[str, int], ...]
    #: The job's ``--cpus-per-gpu``: its CPU count is set to follow its GPUs.
    cpus_per_gpu: int = 0

    def __post_init__(self) -> None:
        if not self.partition or any(c.isspace() or c in ",=" for c in self.partition):
            raise PlacementError(f"bad partition name {self.partition!r}")
        if not self.gpus_by_node:
            raise PlacementError("a placement needs at least one node")
        names = [n for n, _ in self.gpus_by_node]
        if len(set(names)) != len(names):
            raise PlacementError(f"placement lists a node twice: {names}")
        for node, gpus in self.gpus_by_node:
            if not node or any(c.isspace() or c in ",=[]" for c in node):
                raise PlacementError(f"bad node name {node!r}")
            if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
                raise PlacementError(f"node {node!r} given {gpus!r} GPUs; need a positive int")

    @staticmethod
    def of(partition: str, gpus_by_node: Mapping[str, int], cpus_per_gpu: int = 0) -> Placement:
        return Placement(partition, tuple(sorted(gpus_by_node.items())), max(cpus_per_gpu, 0))

    @property
    def cpus(self) -> int:
        """CPUs the placement should carry (0: leave Slurm's count alone)."""
        return self.cpus_per_gpu * self.total_gpus

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.gpus_by_node)

    @property
    def nodelist(self) -> str:
        """The node list in Slurm's compressed form (``v100n[1-2]``)."""
        return str(hostlist.collect_hostlist(list(self.nodes)))

    @property
    def num_nodes(self) -> int:
        return len(self.gpus_by_node)

    @property
    def total_gpus(self) -> int:
        return sum(g for _, g in self.gpus_by_node)

    @property
    def uniform(self) -> bool:
        return len({g for _, g in self.gpus_by_node}) == 1

    def as_dict(self) -> dict[str, int]:
        return dict(self.gpus_by_node)


@dataclass(frozen=True)
class SubmitRequest:
    """One batch script to submit, held and tagged: what every backend's ``submit`` takes.

    One parameter object, so the port and each backend (and each fake) name the
    submission's parts and their defaults once. ``sbatch_args`` come before
    hops's own options; ``as_user`` submits as that user (through the command
    prefix) instead of as hopsd.
    """

    script_path: str
    tag: HopsTag
    sbatch_args: Sequence[str] = ()
    as_user: str | None = None


@runtime_checkable
class SlurmPort(Protocol):
    """Operations hops performs on Slurm. Every failure is a ``SlurmError`` subclass."""

    name: str

    def submit(self, request: SubmitRequest) -> int:
        """Submit held (``--hold --requeue``, tagged); never retried. Returns the job id."""
        ...

    def list_jobs(self) -> list[SlurmJob]:
        """All jobs Slurm knows, in one call."""
        ...

    def list_nodes(self) -> list[SlurmNode]:
        """All nodes, in one call."""
        ...

    def update_pending(self, job_id: int, placement: Placement) -> None:
        """Pin a pending (held) job to a partition, nodes and GPU counts."""
        ...

    def release(self, job_id: int) -> None: ...

    def hold(self, job_id: int) -> None: ...

    def hold_many(self, job_ids: Sequence[int]) -> dict[int, str]:
        """Hold many jobs in as few calls as the backend allows (adoption holds thousands).

        Returns why Slurm refused each job it did not hold (empty: all held).
        ``SlurmUnavailableError`` means it is unknown which were held; holding
        again is harmless.
        """
        ...

    def requeue_hold(self, job_id: int) -> None:
        """Stop a running job and put it back in the queue, held."""
        ...

    def make_eligible(self, job_id: int) -> None:
        """Clear a requeued job's begin-time wait (to a moment from now)."""
        ...

    def cancel(self, job_id: int | str, as_user: str | None = None) -> None:
        """Cancel a job, or one task of a job array given as ``ARRAY_TASK`` (``26_1``)."""
        ...

    def signal(self, job_id: int, signal: str = "USR1", *, batch_only: bool = True) -> None:
        """Send ``signal`` to the job's batch script (``batch_only``) or to all its steps.

        hops's checkpoint notice is ``USR1`` to every step (``batch_only=False``),
        so ranks launched by ``srun`` or ``torchrun`` hear it too.
        """
        ...

    def accounting(self, job_ids: Sequence[int]) -> list[AccountingRecord]:
        """Final states from the accounting database, one call for all ids."""
        ...

    def runs(self, job_ids: Sequence[int]) -> list[RunRecord]:
        """Every run of these jobs with its batch step, oldest first, in one call.

        Raises ``SlurmAccountingDisabledError`` where no accounting database is kept.
        """
        ...


@runtime_checkable
class SlurmPolicyReads(Protocol):
    """The centre's policy as Slurm keeps it: GPU limits, shares, partitions' MaxTime.

    Every backend offers it (through ``sacctmgr`` and ``sshare``); a port without
    it is one that cannot read a centre's policy, and hops plans as if none were set.
    """

    def gpu_limits(self) -> SlurmLimits:
        """Every association's and QOS's GPU limits, in one read per table."""
        ...

    def shares(self) -> tuple[ShareRow, ...]:
        """The association tree's shares (``sshare -a``)."""
        ...

    def partition_times(self) -> dict[str, float | None]:
        """Each partition's MaxTime in seconds (None: unlimited)."""
        ...


def hold_each(hold: Callable[[int], None], job_ids: Sequence[int]) -> dict[int, str]:
    """``hold_many`` one call per job, for backends without a batched hold: each refusal
    is kept per job; an unreachable Slurm stops the loop (raised)."""
    refused: dict[int, str] = {}
    for job_id in job_ids:
        try:
            hold(job_id)
        except SlurmUnavailableError:
            raise
        except SlurmCommandError as exc:
            refused[job_id] = str(exc)
    return refused


def read_retried_once(
    read: Callable[[], T],
    what: str,
    *,
    final: tuple[type[SlurmUnavailableError], ...] = (SlurmTimeoutError,),
) -> T:
    """An idempotent read, retried once when Slurm did not answer (``SlurmUnavailableError``).

    ``final`` are the kinds of unavailability a second try would only repeat: a
    timeout (the read already waited its whole time), a refused token. Writes are
    never retried: a lost reply may still have been acted on.
    """
    try:
        return read()
    except final:
        raise
    except SlurmUnavailableError as exc:
        log.warning("%s: %s; retrying once", what, exc)
        return read()


#: A job id as Slurm prints it and users type it: ``42``, or ``26_1`` for task 1 of array 26.
JOB_ID_TEXT = re.compile(r"([0-9]{1,10})(?:_([0-9]{1,10}))?")


@dataclass(frozen=True)
class JobRef:
    """A job named the way users name it: a Slurm job id, or an array task (``26_1``).

    Every command reads job-id text with :func:`parse_job_ref` and finds the job
    with :func:`resolve_job`, so ``hops status 26_1`` and ``hops cancel 26_1``
    mean the same job.
    """

    job_id: int
    task: int | None = None

    def __str__(self) -> str:
        return str(self.job_id) if self.task is None else f"{self.job_id}_{self.task}"


def parse_job_ref(text: str) -> JobRef:
    """``42`` or ``26_1`` (ASCII digits only); anything else raises ValueError."""
    found = JOB_ID_TEXT.fullmatch(text)
    if found is None or int(found.group(1)) <= 0:
        raise ValueError(f"not a Slurm job id: {text!r} (e.g. 42, or 26_1 for an array task)")
    task = found.group(2)
    return JobRef(int(found.group(1)), None if task is None else int(task))


def resolve_job(ref: JobRef, jobs: Sequence[SlurmJob]) -> SlurmJob | JobRef | None:
    """The job Slurm lists under ``ref``, else None.

    A plain id is the job of that id. An array task Slurm has split into a job
    of its own (``squeue`` shows it with ``ARRAY_TASK``, e.g. task ``1_1`` as job
    2) is that job. A task still pending inside its array's record (``0-3`` on
    the array's own job) has no job of its own yet: the ref itself is returned,
    which Slurm's commands take as it is.
    """
    if ref.task is None:
        return next((j for j in jobs if j.job_id == ref.job_id), None)
    text = str(ref)
    split = next((j for j in jobs if j.array_id == text), None)
    if split is not None:
        return split
    array = next((j for j in jobs if j.job_id == ref.job_id and not j.array_id), None)
    if array is not None and not array.finished and _in_tasks(ref.task, array.array_tasks):
        return ref
    return None


def _in_tasks(task: int, tasks: str) -> bool:
    """Whether ``task`` is in Slurm's task string (``0-3,7,9-11%2``)."""
    for part in tasks.split("%")[0].split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (high or low).isdigit() and int(low) <= task <= int(high or low):
            return True
    return False


def job_id_arg(job_id: int | str | JobRef) -> str:
    """A job id as Slurm commands take it: text is parsed (:func:`parse_job_ref`), never raw."""
    if isinstance(job_id, bool):
        raise ValueError(f"not a Slurm job id: {job_id!r}")
    if isinstance(job_id, int):
        if job_id <= 0:
            raise ValueError(f"not a Slurm job id: {job_id!r}")
        return str(job_id)
    return str(job_id if isinstance(job_id, JobRef) else parse_job_ref(job_id))
