"""The output options of the table commands, as typer options (see :mod:`hops_cli.table`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

__all__ = ["AsJson", "NoHeader", "Parsable", "columns_option"]

NoHeader = Annotated[bool, typer.Option("--noheader", "-h", help="No header line.")]
Parsable = Annotated[
    bool, typer.Option("--parsable", "-P", help="'|'-separated fields, no padding.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def columns_option(columns: Sequence[str]) -> Any:
    """``-o/--format``, its help naming the command's columns."""
    return typer.Option("--format", "-o", help=f"Columns, comma-separated: {','.join(columns)}.")
