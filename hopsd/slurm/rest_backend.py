"""The Slurm port over slurmrestd (``[slurm] backend = "rest"``), authenticated by a JWT.

For centres where hopsd may not run Slurm's commands but may reach slurmrestd.
Jobs and nodes are read with one request each (``GET .../jobs``, ``.../nodes``:
the same data-parser records as ``squeue --json``/``sinfo --json`` of 23.02+, so
the same parsers read them); submit, update, hold, release, signal and cancel
are one request each. Jobs run as the token's user: slurmrestd has no "on
behalf of" for a JWT, so ``as_user`` is refused.

Three operations stay with the commands, given as the ``cli`` port (its
``command_prefix`` may reach the controller host over ssh): ``requeue_hold``,
because slurmrestd 24.11 (data parsers v0.0.40-42) offers no requeue, and
``accounting``/``runs``, which read ``sacct``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from hopsd.slurm.classify import Failure, failure_of
from hopsd.slurm.cli_backend import CliFallback, CliSlurm, check_sbatch_args
from hopsd.slurm.errors import (
    SlurmAuthError,
    SlurmCommandError,
    SlurmJobNotFoundError,
    SlurmParseError,
    SlurmTimeoutError,
    SlurmUnavailableError,
    SubmitArgumentError,
)
from hopsd.slurm.parse_sinfo import nodes_from_document
from hopsd.slurm.parse_squeue import jobs_from_document
from hopsd.slurm.port import (
    Placement,
    SlurmJob,
    SlurmNode,
    SubmitRequest,
    hold_each,
    job_id_arg,
    read_retried_once,
)
from hopsd.slurm.rest_client import RestClient
from hopsd.slurm.rest_submit import job_description

T = TypeVar("T")


class RestSlurm(CliFallback):
    """:class:`~hopsd.slurm.port.SlurmPort` through slurmrestd, with the CLI for what it lacks.

    The commands requeue (slurmrestd 24.11 has no requeue operation) and read
    accounting and runs (``sacct``).
    """

    name = "rest"

    def __init__(self, client: RestClient, cli: CliSlurm | None = None) -> None:
        super().__init__(cli)
        self.client = client

    # ------------------------------------------------------------------ writes
    def submit(self, request: SubmitRequest) -> int:
        """``POST .../job/submit``: held, requeueable, untyped ``gres/gpu:<smallest>``, tagged.

        The script's ``#SBATCH`` lines and ``sbatch_args`` are translated
        first and hops's own fields set last, so the job is always held and tagged.
        """
        _no_other_user(request.as_user)
        check_sbatch_args(request.sbatch_args)
        path = request.script_path
        try:
            script = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SubmitArgumentError(f"cannot read batch script {path}: {exc}") from exc
        job = job_description(script, request.sbatch_args, environ=os.environ, cwd=os.getcwd())
        job.update(
            hold=True,
            requeue=True,
            tres_per_node=f"gres/gpu:{request.tag.demands[0]}",
            comment=request.tag.encode(),
        )
        reply = self.client.post("job/submit", {"job": job})
        job_id = reply.get("job_id")
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
            raise SlurmParseError(f"slurmrestd accepted a job but gave no job id: {reply!r:.300}")
        return job_id

    def update_pending(self, job_id: int, placement: Placement) -> None:
        """Partition, node list, node count and GPUs in one ``POST .../job/<id>``.

        As with ``scontrol update``: a uniform placement asks ``gres/gpu:M`` per
        node and clears the job total; an uneven one clears the per-node request
        and asks the job total (Slurm spreads it; the contract tests check where).
        """
        self.client.post(f"job/{int(job_id)}", update_body(placement))

    def release(self, job_id: int) -> None:
        self.client.post(f"job/{int(job_id)}", {"hold": False})

    def hold(self, job_id: int) -> None:
        self.client.post(f"job/{int(job_id)}", {"hold": True})

    def hold_many(self, job_ids: Sequence[int]) -> dict[int, str]:
        """One request per job: Slurm's API holds a single job per call."""
        return hold_each(self.hold, job_ids)

    def make_eligible(self, job_id: int) -> None:
        """Begin time two seconds from now (see ``CliSlurm.make_eligible`` for why not now)."""
        begin = {"set": True, "infinite": False, "number": int(time.time()) + 2}
        self.client.post(f"job/{int(job_id)}", {"begin_time": begin})

    def cancel(self, job_id: int | str, as_user: str | None = None) -> None:
        """``DELETE .../job/<id>``; an array task is given as ``ARRAY_TASK`` (``26_1``)."""
        _no_other_user(as_user)
        path = f"job/{job_id_arg(job_id)}"
        reply = self.client.delete(path)
        check_signal_status(("DELETE", self.client.path(path)), reply, done_is_ok=True)

    def signal(self, job_id: int, signal: str = "USR1", *, batch_only: bool = True) -> None:
        """Send ``signal`` to the job's batch script only (``BATCH_JOB``), or to all its steps."""
        flags = "BATCH_JOB" if batch_only else "FULL_JOB"
        params = {"signal": signal_name(signal), "flags": flags}
        path = f"job/{int(job_id)}"
        reply = self.client.delete(path, params=params)
        check_signal_status(("DELETE", self.client.path(path)), reply)

    # ------------------------------------------------------------------- reads
    def list_jobs(self) -> list[SlurmJob]:
        return self._read(lambda: jobs_from_document(self.client.get("jobs")))

    def list_nodes(self) -> list[SlurmNode]:
        return self._read(lambda: nodes_from_document(self.client.get("nodes")))

    def _read(self, read: Callable[[], T]) -> T:
        """An idempotent read, retried once when slurmrestd or slurmctld did not answer."""
        return read_retried_once(read, "slurmrestd read", final=(SlurmTimeoutError, SlurmAuthError))


def update_body(placement: Placement) -> dict[str, Any]:
    """The job description that pins a pending job to ``placement``."""
    body: dict[str, Any] = {
        "partition": placement.partition,
        "required_nodes": list(placement.nodes),
        "minimum_nodes": placement.num_nodes,
        "maximum_nodes": placement.num_nodes,
    }
    if placement.uniform:
        body.update(tres_per_job="", tres_per_node=f"gres/gpu:{placement.gpus_by_node[0][1]}")
    else:
        body.update(tres_per_node="", tres_per_job=f"gres/gpu:{placement.total_gpus}")
    if placement.cpus:  # CPUs follow the GPUs (see cli_backend.update_argv)
        body["minimum_cpus"] = placement.cpus
    return body


def check_signal_status(
    what: tuple[str, str], reply: Mapping[str, Any], *, done_is_ok: bool = False
) -> None:
    """Raise what a cancel or signal reply reports per job.

    slurmrestd answers HTTP 200 with an empty ``errors`` list even for an
    unknown job (24.11, v0.0.42): the outcome is in ``status[].error``.
    ``done_is_ok``: cancelling a job that has already ended is no failure (as
    with ``scancel``, which exits 0 then).
    """
    for entry in reply.get("status") or []:
        error = entry.get("error") if isinstance(entry, Mapping) else None
        if not isinstance(error, Mapping) or not error.get("code"):
            continue
        said = str(error.get("message") or error.get("string") or error)
        failure = failure_of(said, {error.get("code")})
        if done_is_ok and failure is Failure.ALREADY_DONE:
            continue
        if failure is Failure.UNAVAILABLE:
            raise SlurmUnavailableError(f"{' '.join(what)}: {said}")
        if failure is Failure.NOT_FOUND:
            raise SlurmJobNotFoundError(what, 200, said)
        raise SlurmCommandError(what, 200, said)


def signal_name(signal: str) -> str:
    """``USR1``/``SIGUSR1``/``10`` as Slurm takes it (``SIGUSR1``); anything else is refused."""
    text = signal.strip().upper()
    if text.isdigit():
        if not 1 <= int(text) <= 64:
            raise SubmitArgumentError(f"signal number {text} is out of range")
        return text
    name = text if text.startswith("SIG") else f"SIG{text}"
    if not name[3:].isalnum() or not 4 <= len(name) <= 12:
        raise SubmitArgumentError(f"bad signal name {signal!r}")
    return name


def _no_other_user(as_user: str | None) -> None:
    if as_user is not None:
        raise SubmitArgumentError(
            "the REST backend acts as the owner of its token; it cannot act as "
            f"{as_user!r} (use that user's own token)"
        )


def rest_from_settings(
    url: str,
    token_file: str,
    *,
    version: str,
    timeout_s: float,
    cli: CliSlurm,
    transport: Any = None,
) -> RestSlurm:
    """The REST port for ``[slurm] rest_url``/``rest_token_file``/``rest_version``."""
    client = RestClient(url, token_file, version=version, timeout_s=timeout_s, transport=transport)
    return RestSlurm(client, cli=cli)
