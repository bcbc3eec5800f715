"""The job filters every read command takes, as typer options (see :mod:`hops_cli.filters`)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["EndedStates", "JobIds", "Jobs", "Me", "Partitions", "States", "Users"]

JobIds = Annotated[
    list[str] | None, typer.Argument(help="Only these Slurm job ids (array ids like 26_1 too).")
]
Jobs = Annotated[
    list[str] | None,
    typer.Option("--jobs", "-j", help="Only these job ids, comma-separated (as squeue -j)."),
]
Users = Annotated[
    list[str] | None,
    typer.Option("--user", "-u", help="Only these users' jobs (repeat or comma-separate)."),
]
Me = Annotated[bool, typer.Option("--me", help="Only your jobs.")]
#: squeue's spellings: ``-t/--states`` (``--state`` too: squeue takes it as an abbreviation).
States = Annotated[
    list[str] | None,
    typer.Option(
        "--state",
        "--states",
        "-t",
        help="Only these states: queued,running,done... or Slurm's PD,R,CD,FAILED...",
    ),
]
#: sacct's spelling ``-s/--state``, and ``-t`` as ``hops status`` takes it.
EndedStates = Annotated[
    list[str] | None,
    typer.Option(
        "--state",
        "-s",
        "-t",
        help="Only these end states: done,failed,cancelled or CD,F,CA,TO...",
    ),
]
Partitions = Annotated[
    list[str] | None,
    typer.Option(
        "--partition", "-p", help="Only jobs placed in these partitions (or on these GPU types)."
    ),
]
