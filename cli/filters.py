"""The job filters every read command takes, with Slurm's names.

``JOBID...`` (array ids ``26_1`` accepted as ``26``), ``-u/--user`` (repeatable
or comma-separated), ``--me``, ``-t/--state`` and ``-p/--partition`` mean the
same on ``hops status``, ``show`` and ``history`` as on squeue and sacct.
The options themselves are declared in :mod:`hops_cli.filter_options`; this
module needs no typer, so ``hops status`` can run without it.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable, Sequence

from hops_cli.common import EXIT_USAGE, fail
from hopsd.views.filters import JobFilter


def _split(values: Iterable[str] | None) -> list[str]:
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def parse_job_id(text: str) -> int:
    """``26`` or an array form (``26_1``, ``26_[1-3]``): the job is the Slurm id before ``_``."""
    head = text.split("_", 1)[0]
    if not head.isdigit():
        fail(f"not a job id: {text!r}", EXIT_USAGE)
    return int(head)


def job_filter(
    job_ids: Sequence[str] | None,
    users: Sequence[str] | None,
    me: bool,
    states: Sequence[str] | None,
    partitions: Sequence[str] | None,
    default_me: bool = False,
    known_states: Iterable[str] = (),
) -> JobFilter:
    """The filter the options ask for; without ids or users, ``default_me`` picks yours only."""
    ids = frozenset(parse_job_id(j) for j in _split(job_ids)) or None
    names = set(_split(users))
    if me or (default_me and not names and ids is None):
        names.add(getpass.getuser())
    wanted = {s.lower() for s in _split(states)}
    known = set(known_states)
    if known and (bad := sorted(wanted - known)):
        fail(f"unknown state {', '.join(bad)}; known: {','.join(sorted(known))}", EXIT_USAGE)
    return JobFilter(
        ids,
        frozenset(names) or None,
        frozenset(wanted) or None,
        frozenset(_split(partitions)) or None,
    )
