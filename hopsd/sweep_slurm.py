"""A sweep's cells as one Slurm job array, through submitit: ``hops simulate --executor
slurm``, given to :func:`hopsd.sim.sweep_run.run_sweep` as its remote runner.

The simulator never reaches Slurm (an import contract keeps submitit and this
module out of ``hopsd.sim``); this module only submits the simulator's own
cell function and waits for the files it writes.

Any Slurm cluster the user can submit to will do: no hopsd, no hops
configuration, only ``sbatch``/``srun``/``sinfo``/``squeue`` on the PATH and a
results directory every node can write (a shared file system, as a home or
scratch directory is on a cluster). Each array task runs
:func:`hopsd.sim.sweep.run_cells` (one cell, or a few when the sweep is larger
than the cluster's MaxArraySize or ``cells_per_task`` asks) in the Python that
submitted it (submitit pickles the call and starts ``python -m
submitit.core._submit`` under ``srun``), so the nodes need the same
environment at the same path.

The cells' own files are what counts: a task that wrote its cell has
succeeded whatever Slurm says afterwards, and one that left the queue without
it has failed (squeue tells, so no accounting database is needed); its
submitit log (``slurm/`` in the results directory) says why. Those failures
are reported together once the array has ended; the cells that did finish
stay, and a re-run computes only the others.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hopsd.core.errors import missing_extra
from hopsd.sim.sweep import Cell, SweepError, run_cells, write_atomic

#: Where submitit keeps the pickles and logs of the array's tasks.
LOGS = "slurm"
#: The id of the last array submitted for the results directory, in LOGS.
ARRAY_FILE = "array.json"
#: ``IsADirectoryError: [Errno 21] ...``, ``hopsd.core.errors.InvalidInputError: ...``
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b:?")
#: Slurm's queue (``squeue``) is looked at this often while the array runs.
STATE_CHECK_S = 10.0
#: How long a missing cell file is given to appear before its task counts as failed.
FILE_GRACE_S = 5.0
#: Slurm's own default MaxArraySize, assumed when the cluster's cannot be read.
DEFAULT_MAX_ARRAY = 1001


@dataclass(frozen=True)
class SlurmOptions:
    """How the array is submitted: partition (None: the cluster's default), time limit
    of one cell in minutes, how many tasks run at once, CPUs per task, cells per task
    (None: one, or as many as keep the array within the cluster's MaxArraySize),
    memory per task (None: the cluster's default)."""

    partition: str | None = None
    time_limit_min: int = 60
    array_parallelism: int = 64
    cpus_per_task: int = 1
    cells_per_task: int | None = None
    mem_gb: float | None = None
    job_name: str = "hops-sweep"
    poll_s: float = 2.0


def check_slurm(options: SlurmOptions) -> None:
    """Refuse at once, saying what to do, when no Slurm answers here or the partition
    is not one of its partitions."""
    missing = [cmd for cmd in ("sbatch", "srun", "sinfo", "squeue") if shutil.which(cmd) is None]
    if missing:
        raise SweepError(
            f"--executor slurm: no Slurm here ({missing[0]} is not on PATH); run hops "
            "where you submit jobs from (a login node), or use --executor local"
        )
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired:
        raise SweepError("--executor slurm: sinfo did not answer in 30 s") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise SweepError(
            f"--executor slurm: Slurm does not answer (sinfo: {why}); check that the "
            "controller is up and SLURM_CONF points at it, or use --executor local"
        )
    partitions = sorted(set(done.stdout.split()))
    if options.partition is not None and options.partition not in partitions:
        raise SweepError(
            f"--partition {options.partition!r}: no such partition; "
            f"this cluster has: {', '.join(partitions) or 'none'}"
        )


def make_executor(folder: Path, options: SlurmOptions, cells_per_task: int = 1) -> Any:
    """submitit's Slurm executor, set up for one array of tasks of ``cells_per_task``
    cells each (the time limit is one cell's times that)."""
    try:
        import submitit
    except ImportError as exc:
        raise missing_extra("--executor slurm", "submitit", "submitit") from exc
    executor = submitit.SlurmExecutor(folder=str(folder / "%j"))
    params: dict[str, Any] = {
        "job_name": options.job_name,
        "time": options.time_limit_min * cells_per_task,
        "cpus_per_task": options.cpus_per_task,
        "array_parallelism": options.array_parallelism,
    }
    if options.partition is not None:
        params["partition"] = options.partition
    if options.mem_gb is not None:
        params["mem"] = f"{max(1, round(options.mem_gb * 1024))}M"
    executor.update_parameters(**params)
    return executor


@dataclass(frozen=True)
class SlurmArray:
    """The remote runner of a sweep: its missing cells as one job array with ``options``."""

    options: SlurmOptions = SlurmOptions()

    def __call__(
        self, todo: Sequence[Cell], results: Path, progress: Callable[[int, str], None]
    ) -> list[str]:
        return run_on_slurm(todo, results, self.options, progress)


def run_on_slurm(
    todo: Sequence[Cell],
    results: Path,
    options: SlurmOptions,
    progress: Callable[[int, str], None],
) -> list[str]:
    """Submit ``todo`` as one job array, wait for it with ``progress(cells of the tasks
    ended, what)``; returns notes for the report. Raises :class:`SweepError` naming the
    failed cells."""
    check_slurm(options)
    refuse_while_running(results)
    groups = task_groups(todo, options.cells_per_task, max_array_size())
    executor = make_executor(results / LOGS, options, len(groups[0]))
    from submitit.core.utils import FailedSubmissionError, UncompletedJobError

    try:
        jobs = executor.map_array(run_cells, groups, [str(results)] * len(groups))
    except (FailedSubmissionError, UncompletedJobError) as exc:
        raise SweepError(f"--executor slurm: sbatch refused the array: {exc}") from None
    array = str(jobs[0].job_id).split("_")[0]
    write_atomic(results / LOGS / ARRAY_FILE, {"array": array})
    try:
        _wait(jobs, [len(g) for g in groups], array, options, progress)
    except KeyboardInterrupt:
        raise SweepError(
            f"interrupted: job array {array} keeps running and its cells still land in "
            f"{results}; once it has ended (squeue -j {array}), run the same command again "
            f"to merge and compute what is missing, or `scancel {array}` to stop it"
        ) from None
    failed = _missing(results, groups, jobs)
    if failed:
        time.sleep(FILE_GRACE_S)  # a shared file system may show a node's file late
        failed = _missing(results, groups, jobs)
    if failed:
        raise SweepError(failures_message(array, failed, len(todo)))
    per = f" of up to {len(groups[0])} cells" if len(groups[0]) > 1 else ""
    return [f"job array {array}: {len(groups)} tasks{per}"]


def refuse_while_running(results: Path) -> None:
    """Refuse to submit while the results directory's last array still has tasks queued
    (the sweep was interrupted while waiting): a second array would compute the same
    cells again."""
    try:
        array = str(json.loads((results / LOGS / ARRAY_FILE).read_text())["array"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    from submitit.core.utils import JobPaths

    queued = queued_tasks(array) or {}
    folder = results / LOGS / "%j"
    # a task whose result is written is done, only its step still exiting
    queued = {t: s for t, s in queued.items() if not JobPaths(folder, t, 0).result_pickle.exists()}
    if queued:
        raise SweepError(
            f"job array {array} of {results} still has {len(queued)} tasks in Slurm's queue; "
            f"once it has ended (squeue -j {array}), run the same command again: it merges "
            f"and computes only the cells still missing. Or `scancel {array}` first"
        )


def task_groups(todo: Sequence[Cell], per_task: int | None, max_array: int) -> list[list[Cell]]:
    """The cells of each array task: ``per_task`` each (one when None), more when the
    array would otherwise have more tasks than the cluster's MaxArraySize allows."""
    per = max(per_task or 1, math.ceil(len(todo) / max_array))
    return [list(todo[i : i + per]) for i in range(0, len(todo), per)]


def max_array_size() -> int:
    """The cluster's MaxArraySize (``scontrol show config``), Slurm's default when unread."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_MAX_ARRAY
    return parse_max_array_size(done.stdout) if done.returncode == 0 else DEFAULT_MAX_ARRAY


def parse_max_array_size(config: str) -> int:
    """``MaxArraySize            = 1001`` from ``scontrol show config``."""
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize" and value.strip().isdigit():
            return max(1, int(value.strip()))
    return DEFAULT_MAX_ARRAY


def queued_tasks(array: str) -> dict[str, str] | None:
    """Each task of ``array`` still in Slurm's queue, with its state (``squeue -r``: one
    line per task); None when squeue cannot say (the controller not answering)."""
    try:
        done = subprocess.run(
            ["squeue", "-h", "-r", "-j", array, "-o", "%i %T"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    return parse_queued(done.returncode, done.stdout, done.stderr)


def parse_queued(returncode: int, stdout: str, stderr: str) -> dict[str, str] | None:
    """``squeue -h -r -j ARRAY -o "%i %T"``'s answer: task id -> state. Once the whole
    array has left the controller's memory squeue refuses the id: nothing is queued."""
    if returncode != 0:
        return {} if "Invalid job id" in stderr else None
    return dict(line.split(None, 1) for line in stdout.splitlines() if " " in line.strip())


def _wait(
    jobs: Sequence[Any],
    sizes: Sequence[int],
    array: str,
    options: SlurmOptions,
    progress: Callable[[int, str], None],
) -> None:
    """Until every task has ended: its result written, or gone from Slurm's queue.

    squeue (every :data:`STATE_CHECK_S`) rather than sacct, which clusters without
    accounting lack; between two looks, a task's result file says it is done."""
    open_tasks = list(range(len(jobs)))
    queued: dict[str, str] | None = None
    checked = -STATE_CHECK_S
    while open_tasks:
        if time.monotonic() - checked >= STATE_CHECK_S:
            queued = queued_tasks(array)
            checked = time.monotonic()
        open_tasks = [i for i in open_tasks if not _ended(jobs[i], queued)]
        states = [(queued or {}).get(str(jobs[i].job_id), "") for i in open_tasks]
        running = sum(1 for s in states if s == "RUNNING")
        what = f"job array {array}: {running} running, {len(open_tasks) - running} waiting"
        progress(sum(sizes) - sum(sizes[i] for i in open_tasks), what)
        if open_tasks:
            time.sleep(options.poll_s)


def _missing(
    results: Path, groups: Sequence[Sequence[Cell]], jobs: Sequence[Any]
) -> list[tuple[Cell, Any]]:
    """The cells (with their tasks) whose files are not there."""
    ran = zip(groups, jobs, strict=True)
    return [(c, job) for cells, job in ran for c in cells if not (results / c.relpath).is_file()]


def _ended(job: Any, queued: dict[str, str] | None) -> bool:
    """Whether a task is over: submitit wrote its outcome, or Slurm no longer queues it."""
    if job.paths.result_pickle.exists():
        return True
    return queued is not None and str(job.job_id) not in queued


def error_line(report: str) -> str:
    """The exception line of submitit's report of a failed task (the traceback's last
    ``SomeError: why``), else the report's first line."""
    lines = [line.strip() for line in report.splitlines() if line.strip()]
    errors = [line for line in lines if EXCEPTION_LINE.match(line)]
    return errors[-1] if errors else (lines[0] if lines else "failed")


def failures_message(array: str, failed: Sequence[tuple[Cell, Any]], total: int) -> str:
    """The failed cells, the first one's error and its log; when no task left even a log
    here, the likely cause: a results directory the nodes do not share."""
    cell, job = failed[0]
    if job.paths.result_pickle.exists():
        reason = error_line(str(job.exception()))
    else:
        reason = "left Slurm's queue without a result (cancelled, out of time or memory?)"
    names = ", ".join(c.label for c, _ in failed[:5]) + (" ..." if len(failed) > 5 else "")
    message = (
        f"job array {array}: {len(failed)} of {total} cells failed ({names}); "
        f"{cell.label}: {reason}; log: {job.paths.stderr}. The other cells are kept: "
        "run the same command again to compute only the failed ones"
    )
    if len(failed) == total and not job.paths.stderr.exists():
        message += (
            f". No task left a log in {job.paths.folder.parent}: is the results directory on "
            "a file system the nodes share?"
        )
    return message
