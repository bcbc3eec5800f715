"""The job filters every read command takes, with Slurm's names.

``JOBID...`` or ``-j/--jobs`` (array tasks ``26_1`` too), ``-u/--user`` (repeatable
or comma-separated), ``--me``, ``-t/--state`` and ``-p/--partition`` mean the
same on ``hops status``, ``show`` and ``history`` as on squeue and sacct.
States are Slurm's as well as hops's (:mod:`hops_cli.states`).
The options themselves are declared in :mod:`hops_cli.filter_options`; this
module needs no typer, so ``hops status`` can run without it.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from hops_cli.common import EXIT_USAGE, fail
from hopsd.views.filters import JobFilter

if TYPE_CHECKING:
    from hopsd.config import HopsConfig
    from hopsd.slurm.port import JobRef, SlurmJob


def _split(values: Iterable[str] | None) -> list[str]:
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def job_words(positional: Sequence[str] | None, option: Sequence[str] | None) -> list[str] | None:
    """Job ids given as arguments and with ``-j/--jobs`` together (None when neither)."""
    return [*(positional or ()), *(option or ())] or None


def parse_job_refs(texts: Iterable[str]) -> list[JobRef]:
    """Job ids as every command reads them (the port's one parser); bad text: usage error."""
    from hopsd.slurm.port import parse_job_ref

    refs = []
    for text in texts:
        try:
            refs.append(parse_job_ref(text))
        except ValueError as exc:
            fail(str(exc), EXIT_USAGE)
    return refs


def slurm_job_ids(refs: Sequence[JobRef], config: HopsConfig | None) -> frozenset[int]:
    """The Slurm job ids the refs name, as ``hops cancel`` finds them.

    A plain id is itself. An array task is found in Slurm's job list
    (:func:`hopsd.slurm.port.resolve_job`): a task split into its own job is that
    job, one still inside its array's record is the array's job (what hopsd
    adopted), and a task Slurm no longer lists names no job.
    """
    from hopsd.slurm.port import resolve_job

    ids = {r.job_id for r in refs if r.task is None}
    tasks = [r for r in refs if r.task is not None]
    if tasks:
        jobs = _slurm_jobs(config, tasks)
        for ref in tasks:
            found = resolve_job(ref, jobs)
            if found is not None:
                ids.add(found.job_id)
    return frozenset(ids)


def _slurm_jobs(config: HopsConfig | None, tasks: Sequence[JobRef]) -> list[SlurmJob]:
    from hopsd.config import HopsConfig as Defaults
    from hopsd.slurm.errors import SlurmError
    from hopsd.slurm.factory import port_from_config

    try:
        jobs: list[SlurmJob] = port_from_config(config or Defaults()).list_jobs()
    except (SlurmError, ValueError) as exc:
        fail(f"cannot find array task {tasks[0]} in Slurm: {exc}")
    return jobs


def job_filter(
    job_ids: Sequence[str] | None,
    users: Sequence[str] | None,
    me: bool,
    states: Sequence[str] | None,
    partitions: Sequence[str] | None,
    default_me: bool = False,
    ended_only: bool = False,
    config: HopsConfig | None = None,
) -> JobFilter:
    """The filter the options ask for; without ids or users, ``default_me`` picks yours only.

    Ids given that name no job match nothing (an empty set, not "no filter"),
    and so do states given that select no hops state (Slurm's ``CG``): a
    filter the user asked for never widens to everything. States are read by
    :func:`hops_cli.states.hops_states` (``ended_only`` for ``hops history``).
    """
    from hops_cli.states import UnknownState, hops_states

    texts = _split(job_ids)
    ids = slurm_job_ids(parse_job_refs(texts), config) if texts else None
    names = set(_split(users))
    if me or (default_me and not names and ids is None):
        names.add(getpass.getuser())
    words = _split(states)
    try:
        wanted = hops_states(words, ended_only=ended_only) if words else None
    except UnknownState as exc:
        fail(str(exc), EXIT_USAGE)
    return JobFilter(
        ids,
        frozenset(names) or None,
        wanted,
        frozenset(_split(partitions)) or None,
    )
