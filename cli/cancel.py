"""``hops cancel``: cancel jobs through Slurm, as the user, and say what really happened.

Like ``scancel``, but honest about ids that do not name a live job: an id
Slurm never knew is "no such job" (exit 1), a job that already ended says so
instead of pretending to cancel it, and array tasks (``26_1``) are accepted.
Slurm decides who may cancel what; hops only asks, as the user.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from hops_cli.common import EXIT_USAGE, config_of, fail

if TYPE_CHECKING:  # the Slurm port is imported only when a command runs (fast start)
    from hopsd.slurm.port import JobRef, SlurmJob, SlurmPort


@dataclass(frozen=True)
class Outcome:
    """What became of one id: ``cancelled``, ``finished``, ``unknown`` or ``refused``."""

    text: str
    kind: str
    message: str


def cancel(
    ctx: typer.Context,
    job_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Slurm job ids (e.g. 42, or 26_1 for an array task).", show_default=False
        ),
    ] = None,
    me: Annotated[
        bool, typer.Option("--me", help="Cancel all your unfinished hops jobs (like scancel --me).")
    ] = False,
) -> None:
    """Cancel jobs through Slurm, as you: you can only cancel your own jobs.

    Exit 0 when every id was cancelled or had already finished; 1 when an id
    names no job or Slurm refused; 2 for ids that are not job ids.
    """
    from hopsd.slurm.errors import SlurmError
    from hopsd.slurm.factory import port_from_config
    from hopsd.slurm.port import parse_job_ref

    texts = list(job_ids or [])
    if not texts and not me:
        fail("give job ids or --me", EXIT_USAGE)
    for text in texts:
        try:
            parse_job_ref(text)
        except ValueError as exc:
            fail(str(exc), EXIT_USAGE)
    config = config_of(ctx)
    port = port_from_config(config)
    try:
        outcomes = cancel_all(port, texts, getpass.getuser() if me else None)
    except SlurmError as exc:
        fail(f"cannot cancel: {exc}")
    for outcome in outcomes:
        typer.echo(outcome.message, err=outcome.kind in ("unknown", "refused"))
    if any(o.kind in ("unknown", "refused") for o in outcomes):
        raise typer.Exit(1)


def cancel_all(port: SlurmPort, texts: list[str], me: str | None) -> list[Outcome]:
    """Cancel each id (and with ``me``, each unfinished hops job of that user)."""
    from hopsd.slurm.port import parse_job_ref, resolve_job

    jobs = port.list_jobs()
    if me is not None:
        mine = [j for j in jobs if j.user == me and j.tag is not None and not j.finished]
        texts = texts + [str(j.job_id) for j in mine if str(j.job_id) not in texts]
        if not texts:
            return [Outcome("", "none", f"no unfinished hops jobs of {me}")]
    found = [(text, resolve_job(parse_job_ref(text), jobs)) for text in texts]
    missing = [int(t) for t, job in found if job is None and t.isdigit()]
    ended = {r.job_id: r.state for r in port.accounting(missing)} if missing else {}
    return [_cancel_one(port, text, job, ended) for text, job in found]


def _cancel_one(
    port: SlurmPort, text: str, job: SlurmJob | JobRef | None, ended: dict[int, str]
) -> Outcome:
    from hopsd.slurm.errors import SlurmCommandError
    from hopsd.slurm.port import JobRef

    if isinstance(job, JobRef):  # a task Slurm keeps inside its array's record
        try:
            port.cancel(str(job))
        except SlurmCommandError as exc:
            return Outcome(text, "refused", f"hops: cannot cancel job {text}: {exc.stderr or exc}")
        return Outcome(text, "cancelled", f"Cancelled job {text}")
    if job is None:
        state = ended.get(int(text)) if text.isdigit() else None
        if state is None:
            return Outcome(text, "unknown", f"hops: no such job {text}")
        return Outcome(text, "finished", f"job {text} already finished ({state})")
    if job.finished:
        return Outcome(text, "finished", f"job {text} already finished ({job.state})")
    try:
        port.cancel(job.job_id)
    except SlurmCommandError as exc:
        said = exc.stderr or str(exc)
        if "permission" in said.lower() or "access" in said.lower():
            why = f"it belongs to another user, {job.user or 'unknown'}"
            return Outcome(
                text, "refused", f"hops: cannot cancel job {text}: {why} (Slurm: {said})"
            )
        return Outcome(text, "refused", f"hops: cannot cancel job {text}: {said}")
    return Outcome(text, "cancelled", f"Cancelled job {text}")
