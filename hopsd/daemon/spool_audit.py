"""Every tick, each user's directory of the shared spool is held to its quotas.

The rules are :mod:`hopsd.daemon.spool_budget`'s (what may be there) and
:mod:`hopsd.daemon.spool_reclaim`'s (how space is freed without touching a
file outside the spool). Reading a job's report enforces that one file's quota
too, but only for the files hopsd reads; the audit covers all the rest: a file
named for a job hopsd does not follow, files it does not expect, subdirectories.

Whatever hopsd empties or removes is logged and told to the owner on their
jobs (``hops status``): on the job the file is named for when it runs, else
on each of the user's running jobs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hopsd.daemon.problems import InputProblems
from hopsd.daemon.spool import JOB_FILE, UnsafeSpool, open_dir
from hopsd.daemon.spool_budget import (
    FILE_LIMITS,
    JOB_BUDGET_BYTES,
    UNCOUNTABLE,
    DirJobs,
    Entry,
    over_quota,
    survey,
    to_remove,
)
from hopsd.daemon.spool_reclaim import Tally, discard, reclaim

log = logging.getLogger("hopsd.spool")

UidLookup = Callable[[str], int | None]


class SpoolAudit:
    """Holds the users' directories of the shared spool to their quotas."""

    def __init__(self, uid_of: UidLookup, problems: InputProblems) -> None:
        self.uid_of = uid_of
        self.problems = problems

    def run(self, directories: Sequence[Path], jobs: Mapping[str, DirJobs]) -> None:
        """Audit each directory (named for its user); one that fails is logged and skipped."""
        for directory in directories:
            try:
                self.audit(directory, jobs.get(directory.name, DirJobs()))
            except OSError as exc:
                log.warning("event=spool-audit-failed directory=%s error=%r", directory, str(exc))

    def audit(self, directory: Path, jobs: DirJobs) -> None:
        """Free job files past their quota, then what does not fit the directory's budget."""
        uid = self.uid_of(directory.name)
        if uid is None:
            return
        try:
            dir_fd = open_dir(directory, uid)
        except UnsafeSpool:
            return  # not the user's (any more): nothing of theirs to hold to a quota
        notes = _Notes(jobs)
        try:
            entries, complete = survey(dir_fd, uid)
            freed = _free_job_files(dir_fd, uid, entries, notes)
            rest = [e for e in entries if e.name not in freed]
            removed = to_remove(rest, jobs, complete)
            work = Tally()
            for entry in removed:
                discard(dir_fd, entry.name, uid, work)
            if removed:
                notes.add(None, _removed(removed, jobs))
        finally:
            os.close(dir_fd)
        self._tell(directory, notes)

    def _tell(self, directory: Path, notes: _Notes) -> None:
        """One note per job and audit: many names must not flood the log or hopsd's memory."""
        for slurm_id, said in notes.by_job.items():
            more = f" (and {len(said) - 1} more)" if len(said) > 1 else ""
            if slurm_id is None:
                log.warning("event=spool-quota directory=%s reason=%r", directory, said[0] + more)
            else:
                self.problems.note(slurm_id, said[0] + more, "spool")


class _Notes:
    """What an audit did, by the running job to tell (None: no running job, only the log).

    A job file's quota is told on its own job when that runs; anything else on
    each of the user's running jobs.
    """

    def __init__(self, jobs: DirJobs) -> None:
        self.jobs = jobs
        self.by_job: dict[int | None, list[str]] = {}

    def add(self, name: str | None, said: str) -> None:
        match = JOB_FILE.fullmatch(name or "")
        named = int(match.group(1)) if match else None
        targets: list[int | None] = [*sorted(self.jobs.running)]
        if named in self.jobs.running:
            targets = [named]
        for slurm_id in targets or [None]:
            self.by_job.setdefault(slurm_id, []).append(said)


def _free_job_files(dir_fd: int, uid: int, entries: list[Entry], notes: _Notes) -> set[str]:
    """Free the job files past their own quota; the names freed."""
    by_inode: dict[int, list[str]] = {}
    for entry in entries:
        by_inode.setdefault(entry.inode, []).append(entry.name)
    freed = set()
    for entry in over_quota(entries):
        said = _empty(dir_fd, uid, entry, by_inode[entry.inode])
        if said:
            freed.add(entry.name)
            notes.add(entry.name, said)
    return freed


def _empty(dir_fd: int, uid: int, entry: Entry, same: list[str]) -> str:
    """Free one job file past its own quota (kept in place when it has no other name);
    what was done, or "" when the file is left (swapped meanwhile: the budget counts it).

    ``same``: the surveyed names with its inode number, where its other names in
    the directory are looked for (every name there is hopsd's to answer for)
    instead of reading the directory again.
    """
    match = JOB_FILE.fullmatch(entry.name)
    assert match is not None  # over_quota picks job files only
    try:
        done = reclaim(dir_fd, entry.name, uid, keep_name=True, others=lambda _fd, _info: same)
    except UnsafeSpool:
        return ""
    limit = FILE_LIMITS[match.group(2)]
    return f"spool: above its {limit}-byte quota: {done.describe(entry.name)}"


def _removed(removed: list[Entry], jobs: DirJobs) -> str:
    """The message for names removed past the budget: the largest few by name."""
    names = ", ".join(e.name for e in removed[:3]) + (", ..." if len(removed) > 3 else "")
    total = sum(e.cost for e in removed)
    held = f"{total} bytes" if total < UNCOUNTABLE else "more than hopsd counts"
    return (
        f"spool: above its {jobs.budget}-byte budget ({JOB_BUDGET_BYTES} bytes per running "
        f"or kept job): removed {len(removed)} name(s) holding {held}, largest first: {names}"
    )
