"""Tables the way Slurm's tools print them: aligned plain text, or ``|``-separated.

Box drawing (rich) only on a terminal and for tables short enough to read
there (:data:`BOXED_MAX_ROWS`: rich takes about a millisecond a row, so 12,000
jobs took 13 s); piped output is plain columns so that ``grep``, ``awk`` and
``cut`` work on it, ``--parsable`` is ``|``-separated
without padding (like ``sacct --parsable2``), and ``--noheader`` drops the
header line. ``-o/--format`` picks and orders columns by name.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from hops_cli.common import EXIT_USAGE, fail

#: Rows up to which a terminal gets a boxed table; a longer one prints as plain
#: columns, as ``squeue`` prints any length (about 0.1 s of drawing at this size).
BOXED_MAX_ROWS = 100


@dataclass(frozen=True)
class Layout:
    """How the user asked for a table (``--format``, ``--noheader``, ``--parsable``)."""

    columns: tuple[str, ...] | None = None
    header: bool = True
    parsable: bool = False


def pick_columns(known: Sequence[str], fmt: str | None, default: Sequence[str]) -> list[str]:
    """The columns ``-o a,b,c`` names (any case), else the default; unknown names: usage error."""
    if not fmt:
        return list(default)
    wanted = [c.strip().upper() for c in fmt.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in known]
    if unknown or not wanted:
        fail(
            f"unknown column {', '.join(unknown) or '(none)'} in --format; "
            f"known: {','.join(known)}",
            EXIT_USAGE,
        )
    return wanted


def pick_per_table(
    tables: Sequence[Sequence[str]], fmt: str | None, defaults: Sequence[Sequence[str]]
) -> list[list[str]]:
    """``-o`` for a command that prints several tables: each table's share of the named columns.

    The names are checked against every table's columns together; a table keeps
    the named columns it has, in the order given (none: the table is left out),
    and without ``-o`` each table shows its default.
    """
    if not fmt:
        return [list(d) for d in defaults]
    known = list(dict.fromkeys(c for table in tables for c in table))
    wanted = pick_columns(known, fmt, ())
    return [[c for c in wanted if c in table] for table in tables]


def render(
    title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]], layout: Layout
) -> None:
    """Print rows under the columns: rich on a terminal when short, plain text otherwise."""
    if layout.parsable:
        lines = ["|".join(columns)] if layout.header else []
        lines += ["|".join(r) for r in rows]
        _write(lines)
        return
    if len(rows) <= BOXED_MAX_ROWS and layout.header and sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for c in columns:
            table.add_column(c)
        for r in rows:
            table.add_row(*r)
        Console(highlight=False).print(table)
        return
    _write(plain(columns, rows, layout.header))


def plain(columns: Sequence[str], rows: Sequence[Sequence[str]], header: bool = True) -> list[str]:
    """Left-aligned columns two spaces apart, no trailing blanks (squeue's look)."""
    body = [tuple(columns), *map(tuple, rows)] if header else [tuple(r) for r in rows]
    if not body:
        return []
    if any(len(r) != len(columns) for r in body):
        raise ValueError(f"rows of other widths than the {len(columns)} columns")
    widths = [max(map(len, cells)) for cells in zip(*body, strict=True)]
    # One %-format a row (half the time of str.format's): 10,000 rows stay quick.
    line = "  ".join(f"%-{w}s" for w in widths)
    return [(line % r).rstrip() for r in body]


def _write(lines: Sequence[str]) -> None:
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
