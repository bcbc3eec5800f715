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
    """One row a job: its ``cells`` in the order of ``columns``."""
    pick = picking(columns)
    return [pick(row) for row in map(cells, jobs)]


def picking(keys: Sequence[Any]) -> Callable[[Any], tuple[str, ...]]:
    """What takes ``keys`` out of a row (a mapping by name, a tuple by position) as a
    tuple, even of one: one C call a row, where a large centre's status has 10,000."""
    if len(keys) == 1:  # itemgetter of one key gives the value, not a 1-tuple
        (only,) = keys
        return lambda row: (row[only],)
    return itemgetter(*keys)
