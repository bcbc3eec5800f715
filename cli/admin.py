"""``hops db ...``: ledger administration."""

from __future__ import annotations

import typer

from hops_cli.common import config_of, fail

db_app = typer.Typer(help="Ledger administration.", no_args_is_help=True)


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
