"""Entry point of the ``hops`` command (typer + rich)."""

from __future__ import annotations

import typer

import hopsd

app = typer.Typer(
    name="hops",
    help="Heterogeneity-aware, fair scheduling of deep-learning jobs on Slurm.",
    no_args_is_help=True,
    add_completion=True,
)


@app.callback()
def main() -> None:
    """hops: submit deep-learning jobs to Slurm and let hopsd place them fairly."""


@app.command()
def version() -> None:
    """Print the hops version."""
    typer.echo(f"hops {hopsd.__version__}")


if __name__ == "__main__":
    app()
