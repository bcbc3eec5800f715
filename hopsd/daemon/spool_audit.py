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
    DirJobs,
    Entry,
    over_quota,
    survey,
    to_remove,
)
from hopsd.daemon.spool_reclaim import discard, reclaim

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
        try:
            entries, complete = survey(dir_fd, uid)
            freed = set()
            for entry in over_quota(entries):
                said = _empty(dir_fd, uid, entry)
                if said:
                    freed.add(entry.name)
                    self._tell(directory, jobs, entry.name, said)
            rest = [e for e in entries if e.name not in freed]
            for entry in to_remove(rest, jobs, complete):
                discard(dir_fd, entry.name, uid)
                self._tell(directory, jobs, entry.name, _removed(entry, jobs))
        finally:
            os.close(dir_fd)

    def _tell(self, directory: Path, jobs: DirJobs, name: str, said: str) -> None:
        """Tell the owner on the running job the name is for, else on all their running jobs."""
        match = JOB_FILE.fullmatch(name)
        named = int(match.group(1)) if match else -1
        told = [named] if named in jobs.running else sorted(jobs.running)
        for slurm_id in told:
            self.problems.note(slurm_id, said, "spool")
        if not told:
            log.warning("event=spool-quota directory=%s reason=%r", directory, said)


def _empty(dir_fd: int, uid: int, entry: Entry) -> str:
    """Free one job file past its own quota (kept in place when it has no other name);
    what was done, or "" when the file is left (swapped meanwhile: the budget counts it)."""
    match = JOB_FILE.fullmatch(entry.name)
    assert match is not None  # over_quota picks job files only
    try:
        done = reclaim(dir_fd, entry.name, uid, keep_name=True, ours=lambda _name: True)
    except UnsafeSpool:
        return ""
    limit = FILE_LIMITS[match.group(2)]
    return f"spool: {done.describe(entry.name)}: above its {limit}-byte quota"


def _removed(entry: Entry, jobs: DirJobs) -> str:
    return (
        f"spool: {entry.name} ({entry.cost} bytes) removed: the user's spool directory "
        f"held more than its {jobs.budget}-byte budget ({JOB_BUDGET_BYTES} bytes per job)"
    )
