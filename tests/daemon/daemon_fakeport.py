"""An in-memory Slurm for unit tests of the daemon: the port's protocol, instant scheduling.

It keeps just enough of Slurm's behaviour to test the daemon's logic: held jobs
wait, ``update_pending`` only works on pending held jobs, ``release`` starts a
job at once if its placement fits the free GPUs, ``requeue_hold`` puts a running
job back held with one more restart. Every call is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.throughput_store import SqlThroughputStore
from hopsd.slurm.errors import SlurmCommandError, SlurmUnavailableError
from hopsd.slurm.port import (
    AccountingRecord,
    Placement,
    RunRecord,
    SlurmJob,
    SlurmNode,
    SubmitRequest,
)
from hopsd.slurm.tag import HopsTag, try_decode


@dataclass
class FakeJob:
    job_id: int
    name: str
    user: str
    account: str
    comment: str
    state: str = "PENDING"
    held: bool = True
    partition: str = "all"
    target: dict[str, int] = field(default_factory=dict)
    placement: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    submit_time: float = 0.0
    work_dir: str = "/tmp"
    #: the hold is the owner's own (``sbatch --hold``): the owner may release it
    user_hold: bool = False
    #: Slurm's time limit of the job's runs (seconds; None: unlimited)
    time_limit_s: float | None = None
    #: the times Slurm states for the job's last run (None: not stated, as by default)
    start_time: float | None = None
    end_time: float | None = None
    #: the nodes an ended job ran on: Slurm names them, no longer its GPUs per node
    ended_on: tuple[str, ...] = ()


#: The fields of a fake job that a SlurmJob reports unchanged (``held`` only while pending).
_REPORTED_AS_IS = {f.name for f in fields(FakeJob)} & {f.name for f in fields(SlurmJob)} - {"held"}


@dataclass
class FakeNode:
    name: str
    partition: str
    gpu_type: str
    gpus: int
    state: str = "IDLE"


class FakePort:
    name = "fake"

    def __init__(self, nodes: Sequence[FakeNode]) -> None:
        self.nodes = list(nodes)
        self.jobs: dict[int, FakeJob] = {}
        self.gone: dict[int, str] = {}
        self.calls: list[tuple[str, int]] = []
        self.signal_scopes: list[tuple[int, str]] = []
        self.reads = 0
        self.down = False
        self.refuse: set[tuple[str, int]] = set()
        self.crash_on: tuple[str, int] | None = None
        self._next = 100
        self.run_log: list[RunRecord] = []
        self.hold_batches: list[list[int]] = []

    # -- test controls ---------------------------------------------------------------

    def add_job(
        self,
        tag: HopsTag | None,
        *,
        user: str = "alice",
        account: str = "acct",
        held: bool = True,
        comment: str | None = None,
        running_on: Mapping[str, int] | None = None,
        name: str = "job",
        work_dir: str = "/tmp",
        job_id: int | None = None,
        submit_time: float | None = None,
        user_hold: bool = False,
    ) -> int:
        """A new job; ``job_id`` reuses a given id (as a fresh Slurm cluster does);
        ``user_hold``: held as ``sbatch --hold`` holds (the owner may release it)."""
        self._next = max(self._next, job_id or 0) + (0 if job_id else 1)
        new_id = job_id or self._next
        text = comment if comment is not None else (tag.encode() if tag else "")
        when = float(new_id) if submit_time is None else submit_time
        job = FakeJob(new_id, name, user, account, text, held=held, submit_time=when)
        job.work_dir = work_dir
        job.user_hold = held and user_hold
        if running_on:
            job.state, job.held, job.placement = "RUNNING", False, dict(running_on)
        self.jobs[job.job_id] = job
        return job.job_id

    def owner_release(self, job_id: int, start_on: Mapping[str, int] | None = None) -> None:
        """``scontrol release`` by the job's owner: refused unless the hold is their own.

        Slurm then starts the job where it likes (``start_on``), with no hops decision.
        """
        job = self.jobs[job_id]
        if not job.user_hold:
            raise SlurmCommandError(["scontrol", "release"], 1, "Access/permission denied")
        job.held = job.user_hold = False
        if start_on:
            job.state, job.placement = "RUNNING", dict(start_on)

    def finish(self, job_id: int, state: str = "COMPLETED") -> None:
        job = self.jobs[job_id]
        job.state, job.placement = state, {}
        self._schedule()

    def ran_between_reads(
        self, job_id: int, nodes: Mapping[str, int], start: float, end: float
    ) -> None:
        """The job started on ``nodes`` at ``start`` and completed at ``end``, both between two
        reads; Slurm states its times and, ended, names its nodes but not its GPUs there."""
        job = self.jobs[job_id]
        job.state, job.held, job.placement, job.ended_on = "COMPLETED", False, {}, tuple(nodes)
        job.start_time, job.end_time = start, end

    def forget(self, job_id: int) -> None:
        """The job leaves the queue; accounting remembers its end state."""
        self.gone[job_id] = self.jobs.pop(job_id).state

    def actions(self, job_id: int | None = None) -> list[str]:
        return [a for a, j in self.calls if job_id is None or j == job_id]

    # -- reads -----------------------------------------------------------------------

    def _check_up(self) -> None:
        if self.down:
            raise SlurmUnavailableError("slurmctld does not answer (fake)")

    def list_jobs(self) -> list[SlurmJob]:
        self._check_up()
        self.reads += 1
        return [self._view(j) for j in self.jobs.values()]

    def list_nodes(self) -> list[SlurmNode]:
        self._check_up()
        self.reads += 1
        used = self._used()
        return [
            SlurmNode(
                n.name, (n.partition, "all"), n.gpu_type, n.gpus, used.get(n.name, 0), n.state
            )
            for n in self.nodes
        ]

    def accounting(self, job_ids: Sequence[int]) -> list[AccountingRecord]:
        self._check_up()
        return [
            AccountingRecord(i, self.gone[i], 0, 0, 1.0, 2.0, 1, (), {})
            for i in job_ids
            if i in self.gone
        ]

    def runs(self, job_ids: Sequence[int]) -> list[RunRecord]:
        """Each requeue ends a run whose script the requeue stopped (no real clock here)."""
        self._check_up()
        wanted = set(job_ids)
        logged = {r.job_id for r in self.run_log}
        # a requeue a test made by hand (as Slurm itself would) stopped a running script too
        by_hand = [
            RunRecord(j.job_id, "REQUEUED", 0.0, 10.0, "CANCELLED", 0, 15, 10.0)
            for j in self.jobs.values()
            if j.restarts > 0 and j.job_id not in logged
        ]
        return [r for r in [*self.run_log, *by_hand] if r.job_id in wanted]

    # -- writes ----------------------------------------------------------------------

    def _act(self, action: str, job_id: int) -> FakeJob:
        self._check_up()
        if self.crash_on == (action, job_id):
            self.crash_on = None
            raise KeyboardInterrupt(f"simulated crash before {action} {job_id}")
        self.calls.append((action, job_id))
        if (action, job_id) in self.refuse:
            raise SlurmCommandError(["scontrol", action, str(job_id)], 1, "refused (fake)")
        if job_id not in self.jobs:
            raise SlurmCommandError(["scontrol", action, str(job_id)], 1, "Invalid job id")
        return self.jobs[job_id]

    def submit(self, request: SubmitRequest) -> int:
        return self.add_job(request.tag, user=request.as_user or "alice")

    def update_pending(self, job_id: int, placement: Placement) -> None:
        job = self._act("update", job_id)
        if job.state != "PENDING":
            raise SlurmCommandError(["scontrol", "update"], 1, "Job is no longer pending")
        job.partition, job.target = placement.partition, placement.as_dict()

    def release(self, job_id: int) -> None:
        job = self._act("release", job_id)
        job.held = job.user_hold = False
        self._schedule()

    def hold(self, job_id: int) -> None:
        """hopsd's hold: an admin's (hopsd runs as root or an operator)."""
        job = self._act("hold", job_id)
        if job.state != "PENDING":
            raise SlurmCommandError(["scontrol", "hold"], 1, "Job is no longer pending")
        job.held, job.user_hold = True, False

    def hold_many(self, job_ids: Sequence[int]) -> dict[int, str]:
        """One batched call (counted in ``hold_batches``), each job held as by :meth:`hold`."""
        self._check_up()
        self.hold_batches.append(list(job_ids))
        refused: dict[int, str] = {}
        for job_id in job_ids:
            try:
                self.hold(job_id)
            except SlurmCommandError as exc:
                refused[job_id] = str(exc)
        return refused

    def requeue_hold(self, job_id: int) -> None:
        job = self._act("requeue_hold", job_id)
        if job.state != "RUNNING":
            raise SlurmCommandError(["scontrol", "requeuehold"], 1, "Job is not running")
        job.state, job.held, job.placement = "PENDING", True, {}
        job.restarts += 1
        self.run_log.append(RunRecord(job_id, "REQUEUED", 0.0, 10.0, "CANCELLED", 0, 15, 10.0))
        self._schedule()

    def make_eligible(self, job_id: int) -> None:
        self._act("make_eligible", job_id)

    def signal(self, job_id: int, signal: str = "USR1", *, batch_only: bool = True) -> None:
        job = self._act("signal", job_id)
        self.signal_scopes.append((job_id, "batch" if batch_only else "full"))
        if job.state != "RUNNING":
            raise SlurmCommandError(["scancel", f"--signal={signal}"], 1, "Job is not running")

    def cancel(self, job_id: int, as_user: str | None = None) -> None:
        self._act("cancel", job_id).state = "CANCELLED"

    # -- the "scheduler" ---------------------------------------------------------------

    def _used(self) -> dict[str, int]:
        used: dict[str, int] = {}
        for job in self.jobs.values():
            if job.state == "RUNNING":
                for node, gpus in job.placement.items():
                    used[node] = used.get(node, 0) + gpus
        return used

    def _schedule(self) -> None:
        sizes = {n.name: n.gpus for n in self.nodes}
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.state != "PENDING" or job.held or not job.target:
                continue
            used = self._used()
            if all(used.get(n, 0) + g <= sizes[n] for n, g in job.target.items()):
                job.state, job.placement = "RUNNING", dict(job.target)

    def _view(self, job: FakeJob) -> SlurmJob:
        tag, error = try_decode(job.comment)
        reason = "None"
        if job.held and job.state == "PENDING":
            reason = "JobHeldUser" if job.user_hold else "JobHeldAdmin"
        # the fake job's fields Slurm reports as they are, then what Slurm derives
        alike = {name: getattr(job, name) for name in _REPORTED_AS_IS}
        return SlurmJob(
            **alike,
            reason=reason,
            held=job.held and job.state == "PENDING",
            nodes=tuple(job.placement) or job.ended_on,
            gpus_by_node=tuple(sorted(job.placement.items())),
            gpu_type=None,
            gres_request="gres:gpu:1",
            tag=tag,
            tag_error=error,
            stdout_path="/tmp/out",
        )


def small_cluster() -> list[FakeNode]:
    """Two slow 4-GPU nodes and two fast 4-GPU nodes, one partition per type."""
    return [
        FakeNode("slow1", "slow", "k80", 4),
        FakeNode("slow2", "slow", "k80", 4),
        FakeNode("fast1", "fast", "a100", 4),
        FakeNode("fast2", "fast", "a100", 4),
    ]


class FakeClock:
    """A clock the test advances by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class NothingMeasured:
    """A ledger's measured latencies, none measured yet."""

    def launch_s(self) -> None:
        return None

    def profiling_phase_s(self) -> None:
        return None

    def start_lag_s(self) -> None:
        return None


def a100_pays_8x(
    sessions: sessionmaker[Session], clock: FakeClock, job: int, gpu_counts: Sequence[int] = (1, 4)
) -> None:
    """Record the job's throughput: 10/s on k80 and 80/s on a100, at each GPU count."""
    with sessions.begin() as s:
        store = SqlThroughputStore(s, clock())
        for gpus in gpu_counts:
            store.set_type_aggregated(str(job), "k80", gpus, 10.0)
            store.set_type_aggregated(str(job), "a100", gpus, 80.0)
