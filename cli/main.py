"""Entry point of the ``hops`` command (typer + rich)."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import hopsd
from hops_cli.common import EXIT_USAGE, CliState

try:  # typer vendors click from 0.17 on
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on plain click
    from click.exceptions import UsageError  # type: ignore[assignment]


#: Commands imported only when run (or completed, or listed by --help): each
#: brings SQLAlchemy, rich or the simulator with it, and ``hops version`` or a
#: Tab completion should not wait for those. name -> (module, attribute, settings)
LAZY: dict[str, tuple[str, str, dict[str, Any]]] = {
    "submit": (
        "hops_cli.submit",
        "submit",
        {"allow_extra_args": True, "ignore_unknown_options": False},
    ),
    "status": ("hops_cli.status", "status", {}),
    "show": ("hops_cli.show", "show", {}),
    "history": ("hops_cli.history", "history", {}),
    "fairness": ("hops_cli.fairness", "fairness", {}),
    "cancel": ("hops_cli.cancel", "cancel", {}),
    "nodes": ("hops_cli.nodes", "nodes", {}),
    "simulate": ("hops_cli.simulate", "simulate", {}),
    "replay": ("hops_cli.replay", "replay", {}),
    "db": ("hops_cli.admin", "db_app", {}),
}


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


def quiet_flags(command: Any, ctx: Any) -> Any:
    """Flags take no value, so their help shows no placeholder (typer's rich help prints
    ``<bool>`` beside every flag, ``--help`` too); sub-commands of a group alike."""
    params = [*command.params, command.get_help_option(ctx)]
    for param in params:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        quiet_flags(sub, ctx)
    return command


class LazyCommands(OneLineErrors):
    """The ``hops`` group: commands in :data:`LAZY` are built from their module on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in LAZY if n not in self.commands)]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        quiet_flags(self, ctx)
        super().format_help(ctx, formatter)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return quiet_flags(found, ctx)
        if cmd_name not in LAZY:
            return None
        module, attribute, settings = LAZY[cmd_name]
        target = getattr(importlib.import_module(module), attribute)
        command: Any
        if isinstance(target, typer.Typer):
            command = typer.main.get_group(target)
        else:
            single = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
            single.command(name=cmd_name, context_settings=settings)(target)
            command = typer.main.get_command(single)
        command.name = cmd_name
        self.commands[cmd_name] = command
        return quiet_flags(command, ctx)


def _usage_error(exc: Exception) -> None:
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    command = getattr(getattr(exc, "ctx", None), "info_name", None)
    where = f"{command}: " if command and command != "hops" else ""
    typer.echo(f"hops: {where}{exc.format_message()}", err=True)  # type: ignore[attr-defined]
    raise typer.Exit(EXIT_USAGE) from None


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"hops {hopsd.__version__}")
        raise typer.Exit()


app = typer.Typer(
    cls=LazyCommands,
    name="hops",
    help="Heterogeneity-aware, fair scheduling of deep-learning jobs on Slurm.",
    no_args_is_help=True,
    add_completion=True,
    # Slurm's commands take -h for help; a command with a -h of its own (status's
    # --noheader, as squeue's) keeps it, since click drops a help name a command uses.
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    config: Annotated[
        str | None,
        typer.Option("--config", "-c", help="hops.conf (default: $HOPS_CONF, else built-in)."),
    ] = None,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the hops version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """hops: submit deep-learning jobs to Slurm and let hopsd place them fairly.

    Users: `hops submit`, `hops status`, `hops show JOBID`, `hops history`,
    `hops cancel`. Admins: `hops status --all`, `hops fairness`, `hops nodes`,
    `hops db upgrade`. Planners: `hops simulate`.
    """
    ctx.obj = CliState(config_path=config)


@app.command()
def version() -> None:
    """Print the hops version."""
    typer.echo(f"hops {hopsd.__version__}")


if __name__ == "__main__":
    app()
