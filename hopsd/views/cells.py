"""How a job's figures read in a table cell, for every table of jobs hops prints.

``hops status``, ``hops history`` and hopsd's status page show the same
figures of a job payload (:mod:`hopsd.views.joblist`); spelling them here once
keeps a duration, a latency ratio or a placement from reading one way in one
table and another way in the next. Standard library only: the CLI's quick path
imports this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

#: A job payload (a ``jobs`` entry of the status or history document).
Job = Mapping[str, Any]


def duration(seconds: float | None) -> str:
    """Human duration: ``42s``, ``13m``, ``2.5h``; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def ratio(value: float | None) -> str:
    """A latency ratio (or any ratio) to two decimals; ``-`` for none."""
    return "-" if value is None else f"{value:.2f}"


def placement(nodes: Mapping[str, int]) -> str:
    """``node:gpus`` pairs, comma-separated; empty when the job holds no GPUs."""
    return ",".join(f"{n}:{g}" for n, g in nodes.items())


def demands(options: Sequence[int]) -> str:
    """The job's GPU demand options, comma-separated."""
    return ",".join(map(str, options))


def job_cells(job: Job) -> dict[str, str]:
    """The columns every job table of the CLI has, by column name."""
    return {
        "JOBID": str(job["job_id"]),
        "NAME": job["name"],
        "USER": job["user"],
        "STATE": job["state"],
        "WAIT": duration(job["wait_s"]),
        "ELAPSED": duration(job["elapsed_s"]),
        "RESTARTS": str(job["restarts"]),
        "LR": ratio(job["latency_ratio"]),
    }


def rows(
    jobs: Iterable[Job], columns: Sequence[str], cells: Callable[[Job], Mapping[str, str]]
) -> list[tuple[str, ...]]:
    """One row a job: its ``cells`` in the order of ``columns`` (picked in one C call a
    row: a large centre's status has 10,000 rows)."""
    if len(columns) == 1:  # itemgetter of one key gives the value, not a 1-tuple
        (only,) = columns
        return [(row[only],) for row in map(cells, jobs)]
    pick = itemgetter(*columns)
    return [pick(row) for row in map(cells, jobs)]
