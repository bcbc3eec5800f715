"""``hops db``: ledger administration (upgrade, current, prune, grant-reader)."""

from __future__ import annotations

from typing import Annotated

import typer

from hops_cli.common import EXIT_USAGE, config_of, fail

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


@db_app.command("grant-reader")
def db_grant_reader(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help="PostgreSQL role users read the ledger as.")],
    password: Annotated[
        str | None, typer.Option("--password", help="Give the role this password.")
    ] = None,
    execute: Annotated[
        bool,
        typer.Option("--execute", help="Run the SQL through the ledger's url, not print it."),
    ] = False,
) -> None:
    """Create a PostgreSQL role that may only read the ledger (for the ledger's read_url).

    Prints the SQL (run it as the ledger's owner), or runs it with --execute.
    """
    from hopsd.core.errors import InvalidInputError
    from hopsd.ledger.engine import redact
    from hopsd.ledger.errors import LedgerError
    from hopsd.ledger.readers import grant_reader, reader_statements

    config = config_of(ctx)
    try:
        if not execute:
            for statement in reader_statements(config.ledger_url, role, password):
                typer.echo(f"{statement};")
            return
        grant_reader(config.ledger_url, role, password)
    except InvalidInputError as exc:
        fail(str(exc), EXIT_USAGE)
    except LedgerError as exc:
        fail(f"ledger {redact(config.ledger_url)}: {exc}")
    typer.echo(
        f"role {role} may now read the ledger {redact(config.ledger_url)} and nothing else; "
        "point [ledger] read_url at it in the hops.conf users read"
    )


@db_app.command("prune")
def db_prune(
    ctx: typer.Context,
    days: Annotated[
        float | None,
        typer.Option(help="Keep this many days (default: [ledger] retention_days)."),
    ] = None,
    batch: Annotated[int, typer.Option(help="Rows per transaction.")] = 500,
) -> None:
    """Remove rounds, intents and allocations older than the retention (job rows stay)."""
    import time

    from hopsd.ledger.engine import make_engine, make_sessionmaker, redact
    from hopsd.ledger.errors import LedgerError
    from hopsd.ledger.retention import cutoff_of, prune

    config = config_of(ctx)
    keep = config.retention_days if days is None else days
    if keep <= 0 or batch < 1:
        fail("nothing to prune: retention is off (days <= 0) or --batch < 1", EXIT_USAGE)
    engine = make_engine(config.ledger_url)
    try:
        pruned = prune(make_sessionmaker(engine), cutoff_of(time.time(), keep), batch=batch)
    except LedgerError as exc:
        fail(f"cannot prune ledger {redact(config.ledger_url)}: {exc}")
    finally:
        engine.dispose()
    typer.echo(
        f"ledger {redact(config.ledger_url)}: removed {pruned.rounds} rounds, "
        f"{pruned.intents} intents, {pruned.allocations} allocations, "
        f"{pruned.predictions} predictions older than {keep:g} days"
    )
