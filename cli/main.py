"""Entry point of the ``hops`` command (typer + rich)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import hopsd
from hops_cli.admin import cancel, db_app
from hops_cli.common import EXIT_USAGE, CliState
from hops_cli.fairness import fairness
from hops_cli.history import history
from hops_cli.nodes import nodes
from hops_cli.replay import replay
from hops_cli.show import show
from hops_cli.simulate import simulate
from hops_cli.status import status
from hops_cli.submit import submit

try:  # typer vendors click from 0.17 on
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on plain click
    from click.exceptions import UsageError  # type: ignore[assignment]


class OneLineErrors(TyperGroup):
    """Usage errors (an unknown option, ``--samples nan``) as one ``hops:`` line, exit 2.

    Click would print a usage block and a framed message; every other hops
    error is one line, so these are too. A bare ``hops`` still prints help.
    """

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            _usage_error(exc)


def _usage_error(exc: Exception) -> None:
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    command = getattr(getattr(exc, "ctx", None), "info_name", None)
    where = f"{command}: " if command and command != "hops" else ""
    typer.echo(f"hops: {where}{exc.format_message()}", err=True)  # type: ignore[attr-defined]
    raise typer.Exit(EXIT_USAGE) from None


app = typer.Typer(
    cls=OneLineErrors,
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

    Users: `hops submit`, `hops status`, `hops show JOBID`, `hops history`,
    `hops cancel`. Admins: `hops status --all`, `hops fairness`, `hops nodes`,
    `hops db upgrade`. Planners: `hops simulate`.
    """
    ctx.obj = CliState(config_path=config)


app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
)(submit)
app.command()(status)
app.command()(show)
app.command()(history)
app.command()(fairness)
app.command()(cancel)
app.command()(nodes)
app.command()(simulate)
app.command()(replay)
app.add_typer(db_app, name="db")


@app.command()
def version() -> None:
    """Print the hops version."""
    typer.echo(f"hops {hopsd.__version__}")


if __name__ == "__main__":
    app()
