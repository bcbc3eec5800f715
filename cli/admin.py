"""``hops cancel``, ``hops db upgrade``: the commands that change something."""

from __future__ import annotations

from typing import Annotated

import typer

from hops_cli.common import EXIT_USAGE, config_of, fail

db_app = typer.Typer(help="Ledger administration.", no_args_is_help=True)


def cancel(
    ctx: typer.Context,
    job_ids: Annotated[list[str], typer.Argument(help="Slurm job ids to cancel.")],
) -> None:
    """Cancel jobs through Slurm, as you: you can only cancel your own jobs."""
    from hopsd.slurm.errors import SlurmCommandError, SlurmError
    from hopsd.slurm.factory import port_from_config

    ids: list[int] = []
    for text in job_ids:
        if not (text.isascii() and text.isdigit()):
            fail(f"{text!r} is not a Slurm job id", EXIT_USAGE)
        ids.append(int(text))
    config = config_of(ctx)
    port = port_from_config(config)
    failed = 0
    for job_id in ids:
        try:
            port.cancel(job_id)
        except SlurmCommandError as exc:
            failed += 1
            said = exc.stderr or str(exc)
            if "permission" in said.lower() or "access" in said.lower():
                typer.echo(
                    f"hops: cannot cancel job {job_id}: it belongs to another user (Slurm: {said})",
                    err=True,
                )
            else:
                typer.echo(f"hops: cannot cancel job {job_id}: {said}", err=True)
        except SlurmError as exc:
            fail(f"cannot cancel job {job_id}: {exc}")
        else:
            typer.echo(f"Cancelled job {job_id}")
    if failed:
        raise typer.Exit(1)


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Create the ledger or migrate it to this version's schema."""
    from hopsd.ledger.engine import redact
    from hopsd.ledger.errors import LedgerError
    from hopsd.ledger.migrate import current_revision, head_revision, upgrade

    config = config_of(ctx)
    try:
        before = current_revision(config.ledger_url)
        upgrade(config.ledger_url)
    except LedgerError as exc:
        fail(f"cannot upgrade ledger {redact(config.ledger_url)}: {exc}")
    except OSError as exc:
        fail(f"cannot upgrade ledger {redact(config.ledger_url)}: {exc.strerror or exc}")
    typer.echo(f"ledger {redact(config.ledger_url)}: {before or 'empty'} -> {head_revision()}")


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Print the ledger's schema revision and the one this hops needs."""
    from hopsd.ledger.engine import redact
    from hopsd.ledger.errors import LedgerError
    from hopsd.ledger.migrate import current_revision, head_revision

    config = config_of(ctx)
    try:
        current = current_revision(config.ledger_url)
    except LedgerError as exc:
        fail(f"ledger {redact(config.ledger_url)}: {exc}")
    typer.echo(
        f"ledger {redact(config.ledger_url)}: {current or 'empty'} (needs {head_revision()})"
    )
