"""The Slurm port over Slurm's own commands (sbatch, squeue, sinfo, scontrol, scancel, sacct).

One injected ``run(argv, timeout)`` seam carries every call. Reads are one
command each and may be retried once when the controller did not answer;
``sbatch`` is never retried, since a lost reply may still have queued a job.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar

from hopsd.slurm.classify import Failure, error_for, failure_of
from hopsd.slurm.errors import (
    SlurmCommandError,
    SlurmError,
    SubmitArgumentError,
)
from hopsd.slurm.parse_limits import (
    ASSOC_FIELDS,
    QOS_FIELDS,
    SHARE_FIELDS,
    ShareRow,
    SlurmLimits,
    parse_assocs,
    parse_partition_times,
    parse_qos,
    parse_shares,
)
from hopsd.slurm.parse_queue import (
    NarrowQueue,
    NarrowReadRefused,
    Parsed,
    parse_queue,
    queue_argv,
)
from hopsd.slurm.parse_reservations import SlurmReservation, parse_reservations
from hopsd.slurm.parse_sacct import RUN_FIELDS, SACCT_FIELDS, parse_accounting, parse_runs
from hopsd.slurm.parse_sinfo import parse_nodes
from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import (
    AccountingRecord,
    Placement,
    RunRecord,
    SlurmJob,
    SlurmNode,
    SubmitRequest,
    hold_each,
    job_id_arg,
    read_retried_once,
)
from hopsd.slurm.runner import CompletedRun, Runner, SubprocessRunner

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Job ids per ``scontrol hold`` call: a few kilobytes of argument, a few seconds of work.
HOLD_BATCH = 500
#: ``scontrol hold`` calls made at once (:meth:`CliSlurm.hold_many`): 1,500 jobs held in
#: three calls took 1.2-1.7 s one after another, 0.6-0.9 s together (test cluster, 2 cores).
HOLD_CALLS_AT_ONCE = 4
#: ``scontrol hold LIST`` reports each job it could not hold on a line of its own.
_HOLD_REFUSAL = re.compile(r"^(?P<why>.+) for job (?P<job>[0-9]+)$")

# Options hops sets on every submission; a user's copy would silently undo them.
RESERVED_SBATCH_OPTIONS = (
    "--comment",
    "--hold",
    "-H",
    "--no-requeue",
    "--requeue",
    "--gres",
    "--gpus",
    "-G",
    "--gpus-per-node",
    "--gpus-per-task",
    "--gpus-per-socket",
    "--parsable",
)


@dataclass
class CliSlurm:
    """:class:`~hopsd.slurm.port.SlurmPort` through the Slurm command-line tools."""

    run: Runner = field(default_factory=SubprocessRunner)
    timeout_s: float = 30.0
    name: str = "cli"
    #: What the formatted read lacks for some jobs (per-node GPUs, a reason code), from
    #: the last JSON read: job id -> the formatted view it holds for, and the JSON's job.
    _details: dict[int, tuple[tuple[object, ...], SlurmJob]] = field(
        default_factory=dict, repr=False
    )
    #: The last formatted read's lines and their jobs (unchanged lines are not parsed again).
    _lines: dict[str, Parsed] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ writes
    def submit(self, request: SubmitRequest) -> int:
        """``sbatch`` held, requeueable, untyped ``--gres=gpu:<smallest demand>``, tagged.

        hops's own options come after ``sbatch_args`` and the command line
        beats ``#SBATCH`` lines, so the job is always held and tagged.
        """
        check_sbatch_args(request.sbatch_args)
        argv = [
            *_as_user(request.as_user),
            "sbatch",
            *request.sbatch_args,
            "--parsable",
            "--hold",
            "--requeue",
            f"--gres=gpu:{request.tag.demands[0]}",
            f"--comment={request.tag.encode()}",
            request.script_path,
        ]
        result = self._call(argv)
        return parse_job_id(result)

    def update_pending(self, job_id: int, placement: Placement) -> None:
        """Pin a pending job: partition, node list, node count and GPUs.

        Uniform placements set ``Gres=gpu:M`` per node (clearing any job
        total); uneven ones clear the per-node request and set the job total
        ``TresPerJob=gres:gpu:T`` — Slurm 22.05 rejects a job total while a
        per-node request is still set. Slurm spreads a total itself, so where a
        running job's GPUs are is Slurm's choice (the contract tests check it).
        """
        argv = update_argv(job_id, placement)
        self._call(argv)

    def release(self, job_id: int) -> None:
        self._call(["scontrol", "release", str(job_id)])

    def hold(self, job_id: int) -> None:
        self._call(["scontrol", "hold", str(job_id)])

    def hold_many(self, job_ids: Sequence[int]) -> dict[int, str]:
        """``scontrol hold 1,2,3`` per :data:`HOLD_BATCH` jobs: one process, not one per job,
        up to :data:`HOLD_CALLS_AT_ONCE` of them at a time.

        scontrol holds every listed job it can and names each refused one on
        stderr (``Invalid job id specified for job 7``), exiting 1. An
        unreachable controller raises (once every call has answered); a failure
        that names no job is retried one job at a time, so every job still gets
        its own answer.
        """
        ids = sorted({int(i) for i in job_ids})
        chunks = [ids[start : start + HOLD_BATCH] for start in range(0, len(ids), HOLD_BATCH)]
        refused: dict[int, str] = {}
        for chunk, result in zip(chunks, self._hold_calls(chunks), strict=True):
            if result.ok:
                continue
            if failure_of(f"{result.stderr}\n{result.stdout}") in (
                Failure.UNAVAILABLE,
                Failure.AUTH,
            ):
                raise error_for(result)
            named = hold_refusals(result.stderr, chunk)
            refused.update(named or hold_each(self.hold, chunk))
        return refused

    def _hold_calls(self, chunks: Sequence[Sequence[int]]) -> list[CompletedRun]:
        """One ``scontrol hold`` per chunk, several at once: slurmctld updates the jobs one
        by one whoever asks, but each call's own work (a process, one authenticated
        request per job) overlaps another's. Their answers, in the chunks' order."""

        def hold(chunk: Sequence[int]) -> CompletedRun:
            return self.run(["scontrol", "hold", ",".join(map(str, chunk))], self.timeout_s)

        if len(chunks) < 2:
            return [hold(c) for c in chunks]
        with ThreadPoolExecutor(max_workers=min(HOLD_CALLS_AT_ONCE, len(chunks))) as pool:
            return list(pool.map(hold, chunks))

    def requeue_hold(self, job_id: int) -> None:
        """Requeue held, then hold as hops's own user: an operator's hold.

        ``requeuehold`` leaves a hold the job's owner may ``scontrol release``,
        which would start the job at its last placement with no hops decision.
        The ``hold`` that follows at once (it takes even while the job is still
        completing) is an admin hold when hopsd runs as root, SlurmUser or an
        operator: only such a user can release it. Its failure is logged, not
        raised: the requeue happened, and the chain goes on.
        """
        self._call(["scontrol", "requeuehold", str(job_id)])
        try:
            self._call(["scontrol", "hold", str(job_id)])
        except SlurmError as exc:
            log.warning("event=operator-hold-failed slurm_job=%s error=%r", job_id, str(exc))

    def make_eligible(self, job_id: int) -> None:
        """Eligible two seconds from now, not at once: slurmd refuses a launch whose
        credential dates from the second it revoked the job's last run in ("Job
        credential revoked"), and 24.11 restarts a requeued job fast enough to hit it."""
        self._call(["scontrol", "update", f"JobId={job_id}", "StartTime=now+2"])

    def cancel(self, job_id: int | str, as_user: str | None = None) -> None:
        self._call([*_as_user(as_user), "scancel", job_id_arg(job_id)])

    def signal(self, job_id: int, signal: str = "USR1", *, batch_only: bool = True) -> None:
        """``scancel --batch --signal=SIG``: the batch shell alone, or ``--full``:
        every step, the batch step's processes included (hops's checkpoint notice)."""
        name = signal_word(signal)
        scope = "--batch" if batch_only else "--full"
        self._call(["scancel", scope, f"--signal={name}", str(int(job_id))])

    # ------------------------------------------------------------------- reads
    def list_jobs(self) -> list[SlurmJob]:
        """Every job in one ``squeue --json`` (it carries per-node GPUs in 22.05 too).

        ``--states=all``: 22.05 lists finished jobs in JSON anyway, but 23.02+
        apply squeue's default filter and would hide the endings hops must see.
        """
        return self._read(["squeue", "--json", "--states=all"], lambda r: parse_jobs(r.stdout))

    def list_queue(self) -> list[SlurmJob]:
        """Every job through the narrow formatted read (:mod:`hopsd.slurm.parse_queue`).

        The tick's read: a tenth of the JSON's bytes and time at ten thousand
        jobs. The JSON (:meth:`list_jobs`) is read instead when the formatted
        reply cannot be split safely, and also when a job lacks what the
        formatted fields do not give (a split of GPUs over several nodes, a
        held job's reason code) and no earlier JSON read gave it for the same
        view of the job: then that read's jobs are returned, and what they add
        is kept for the ticks after.
        """
        try:
            narrow = self._read(queue_argv(), lambda r: parse_queue(r.stdout, self._lines))
        except NarrowReadRefused as exc:
            log.warning("event=narrow-queue-refused error=%r", str(exc))
            return self.list_jobs()
        known = self._with_details(narrow)
        if known is not None:
            return known
        jobs = self.list_jobs()
        full = {j.job_id: j for j in jobs}
        self._details = {
            j.job_id: (_view_key(j), full[j.job_id])
            for j in narrow.jobs
            if j.job_id in narrow.needs_detail and j.job_id in full
        }
        return jobs

    def _with_details(self, narrow: NarrowQueue) -> list[SlurmJob] | None:
        """The narrow jobs completed from the kept JSON details, or None if one is missing."""
        jobs = list(narrow.jobs)
        for i, job in enumerate(jobs):
            if job.job_id not in narrow.needs_detail:
                continue
            kept = self._details.get(job.job_id)
            if kept is None or kept[0] != _view_key(job):
                return None
            full = kept[1]
            jobs[i] = replace(
                job, gpus_by_node=full.gpus_by_node, reason=full.reason, held=full.held
            )
        self._details = {k: v for k, v in self._details.items() if k in narrow.needs_detail}
        return jobs

    def list_nodes(self) -> list[SlurmNode]:
        return self._read(["sinfo", "--json"], lambda r: parse_nodes(r.stdout))

    def list_reservations(self) -> list[SlurmReservation]:
        """Every reservation in one ``scontrol -o show reservation`` (see the parser)."""
        argv = ["scontrol", "-o", "show", "reservation"]
        return self._read(argv, lambda r: parse_reservations(r.stdout))

    def accounting(self, job_ids: Sequence[int]) -> list[AccountingRecord]:
        return self._sacct("-X", job_ids, SACCT_FIELDS, parse_accounting)

    def runs(self, job_ids: Sequence[int]) -> list[RunRecord]:
        """Every run and its batch step (``sacct -D`` with steps), one call for all ids."""
        return self._sacct("-D", job_ids, RUN_FIELDS, parse_runs)

    def _sacct(
        self,
        scope: str,
        job_ids: Sequence[int],
        fields: Sequence[str],
        parse: Callable[[str], list[T]],
    ) -> list[T]:
        """One ``sacct`` of every user's jobs ``job_ids`` (none: no call)."""
        if not job_ids:
            return []
        ids = ",".join(str(int(i)) for i in sorted(set(job_ids)))
        argv = ["sacct", scope, "--allusers", "--parsable2", "-j", ids, "-o", ",".join(fields)]
        return self._read(argv, lambda r: parse(r.stdout))

    def gpu_limits(self) -> SlurmLimits:
        """Every association's and QOS's GPU limits: two ``sacctmgr`` reads.

        Raises ``SlurmCommandError`` where no accounting database is kept.
        """
        assoc = ["sacctmgr", "-n", "-P", "show", "assoc", f"format={','.join(ASSOC_FIELDS)}"]
        qos = ["sacctmgr", "-n", "-P", "show", "qos", f"format={','.join(QOS_FIELDS)}"]
        return SlurmLimits(
            self._read(assoc, lambda r: parse_assocs(r.stdout)),
            self._read(qos, lambda r: parse_qos(r.stdout)),
        )

    def shares(self) -> tuple[ShareRow, ...]:
        """The association tree's shares, every account and user (``sshare -a``)."""
        argv = ["sshare", "-n", "-P", "-a", "-o", ",".join(SHARE_FIELDS)]
        return self._read(argv, lambda r: parse_shares(r.stdout))

    def partition_times(self) -> dict[str, float | None]:
        """Each partition's MaxTime in seconds, None when unlimited (one ``sinfo``)."""
        argv = ["sinfo", "-h", "-o", "%R|%l"]
        return self._read(argv, lambda r: parse_partition_times(r.stdout))

    # ----------------------------------------------------------------- helpers
    def _call(self, argv: Sequence[str]) -> CompletedRun:
        result = self.run(argv, self.timeout_s)
        if not result.ok:
            raise error_for(result)
        return result

    def _read(self, argv: Sequence[str], parse: Callable[[CompletedRun], T]) -> T:
        """Run an idempotent read, retrying once if the controller did not answer."""
        return read_retried_once(lambda: parse(self._call(argv)), argv[0])


class CliFallback:
    """The operations a backend leaves to the commands, for it to inherit.

    pyslurm and slurmrestd each lack some (``sbatch`` as the user with its
    ``#SBATCH`` lines, a node-count update, a requeue, per-run ``sacct``); a
    backend inherits these and overrides those it does through its own API.
    """

    def __init__(self, cli: CliSlurm | None = None) -> None:
        self._cli = cli or CliSlurm()

    def submit(self, request: SubmitRequest) -> int:
        return self._cli.submit(request)

    def update_pending(self, job_id: int, placement: Placement) -> None:
        self._cli.update_pending(job_id, placement)

    def make_eligible(self, job_id: int) -> None:
        self._cli.make_eligible(job_id)

    def requeue_hold(self, job_id: int) -> None:
        self._cli.requeue_hold(job_id)

    def signal(self, job_id: int, signal: str = "USR1", *, batch_only: bool = True) -> None:
        self._cli.signal(job_id, signal, batch_only=batch_only)

    def accounting(self, job_ids: Sequence[int]) -> list[AccountingRecord]:
        return self._cli.accounting(job_ids)

    def runs(self, job_ids: Sequence[int]) -> list[RunRecord]:
        """Per-run batch-step records come from ``sacct -D``."""
        return self._cli.runs(job_ids)

    def gpu_limits(self) -> SlurmLimits:
        """GPU limits from ``sacctmgr`` (neither pyslurm nor slurmrestd is asked)."""
        return self._cli.gpu_limits()

    def shares(self) -> tuple[ShareRow, ...]:
        """The association tree's shares from ``sshare``."""
        return self._cli.shares()

    def partition_times(self) -> dict[str, float | None]:
        """Each partition's MaxTime from ``sinfo``."""
        return self._cli.partition_times()


def _view_key(job: SlurmJob) -> tuple[object, ...]:
    """The formatted view a kept JSON detail holds for: the same run, state and reason text."""
    return (job.state, job.start_time, job.nodes, job.restarts, job.reason, job.priority)


def update_argv(job_id: int, placement: Placement) -> list[str]:
    """The ``scontrol update`` command that pins a pending job to ``placement``."""
    argv = [
        "scontrol",
        "update",
        f"JobId={int(job_id)}",
        f"Partition={placement.partition}",
        f"NodeList={placement.nodelist}",
        f"NumNodes={placement.num_nodes}",
    ]
    if placement.uniform:
        argv += ["TresPerJob=", f"Gres=gpu:{placement.gpus_by_node[0][1]}"]
    else:
        argv += ["TresPerNode=", f"TresPerJob=gres:gpu:{placement.total_gpus}"]
    if placement.cpus:
        # 22.05 keeps a requeued job's CPU count from its first placement whatever
        # its --cpus-per-gpu says: a job moved from 1 GPU to 4 got 2 CPUs, not 8
        argv.append(f"NumCPUs={placement.cpus}")
    return argv


def hold_refusals(stderr: str, asked: Sequence[int]) -> dict[int, str]:
    """The jobs ``scontrol hold LIST`` refused, with Slurm's words, from its stderr."""
    wanted = set(asked)
    refused: dict[int, str] = {}
    for line in stderr.splitlines():
        found = _HOLD_REFUSAL.match(line.strip())
        if found is not None and int(found.group("job")) in wanted:
            refused[int(found.group("job"))] = found.group("why")
    return refused


def parse_job_id(result: CompletedRun) -> int:
    """The id ``sbatch --parsable`` printed (``123`` or ``123;cluster``)."""
    first = result.stdout.strip().splitlines()[-1:] or [""]
    text = first[0].split(";", 1)[0].strip()
    if not text.isdigit():
        raise SlurmCommandError(result.argv, result.returncode, result.stderr, result.stdout)
    return int(text)


def check_sbatch_args(args: Sequence[str]) -> None:
    """Refuse extra sbatch arguments that would undo hold, tag, requeue or the GPU request."""
    for arg in args:
        option = arg.split("=", 1)[0]
        short = option if option.startswith("--") else option[:2]
        if option in RESERVED_SBATCH_OPTIONS or short in RESERVED_SBATCH_OPTIONS:
            raise SubmitArgumentError(
                f"sbatch option {option!r} is set by hops itself; remove it from the arguments"
            )


def signal_word(signal: str) -> str:
    """A signal as scancel takes it (``USR1``, ``10``); anything else is refused."""
    text = signal.strip().upper().removeprefix("SIG")
    if text.isdigit() and 1 <= int(text) <= 64:
        return text
    if not text.isalnum() or not 1 <= len(text) <= 9 or text.isdigit():
        raise SubmitArgumentError(f"bad signal {signal!r}")
    return text


def _as_user(user: str | None) -> list[str]:
    """Run as another account (``runuser``), for daemon-side tests and admin actions."""
    if user is None:
        return []
    if not user or user.startswith("-") or any(c.isspace() for c in user):
        raise SubmitArgumentError(f"bad user name {user!r}")
    return ["runuser", "-u", user, "--"]
