"""Entry point of the ``hops`` command (typer + rich)."""

from __future__ import annotations

from typing import Annotated

import typer

import hopsd
from hops_cli.admin import cancel, db_app
from hops_cli.common import CliState
from hops_cli.fairness import fairness
from hops_cli.nodes import nodes
from hops_cli.simulate import simulate
from hops_cli.status import status
from hops_cli.submit import submit

app = typer.Typer(
    name="hops",
    help="Heterogeneity-aware, fair scheduling of deep-learning jobs on Slurm.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    config: Annotated[
        str | None,
        typer.Option("--config", "-c", help="hops.conf (default: $HOPS_CONF, else built-in)."),
    ] = None,
) -> None:
    """hops: submit deep-learning jobs to Slurm and let hopsd place them fairly.

    Users: `hops submit`, `hops status`, `hops cancel`. Admins: `hops status --all`,
    `hops fairness`, `hops nodes`, `hops db upgrade`. Planners: `hops simulate`.
    """
    ctx.obj = CliState(config_path=config)


app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
)(submit)
app.command()(status)
app.command()(fairness)
app.command()(cancel)
app.command()(nodes)
app.command()(simulate)
app.add_typer(db_app, name="db")


@app.command()
def version() -> None:
    """Print the hops version."""
    typer.echo(f"hops {hopsd.__version__}")


if __name__ == "__main__":
    app()
