"""What a user's directory in the shared spool may hold, and what goes when it holds more.

hopsd makes ``<spool_dir>/<user>/`` for hops's files (:mod:`hopsd.daemon.spool`),
but the directory is the user's own (mode 0700), so their jobs can put anything
there, and hopsd reads only the files of the jobs it follows. The limits:

* each job file -- ``<id>.jsonl``, ``<id>.progress.json``, ``<id>.mode``, of a
  running job or not -- has its own quota (:data:`FILE_LIMITS`), so a file named
  for a job hopsd does not read cannot grow without bound either;
* everything the user has in the directory counts against a budget of
  :data:`JOB_BUDGET_BYTES` per job hopsd keeps files for there (the user's
  running jobs and ended ones within their retention; at least one job's):
  every name costs at least a block (:data:`ENTRY_BYTES`), a subdirectory all
  it holds. hopsd looks :data:`MAX_DEPTH` levels deep and at
  :data:`MAX_NAMES` names per directory and tick; a tree deeper or larger, or
  on another filesystem, cannot be counted and is over any budget (so is what
  hopsd moves up out of such a tree while removing it).

Other files are allowed -- a job may keep small files of its own next to its
report, its checkpoint's metadata say -- as long as the directory fits. Past
the budget, what goes is chosen by :func:`to_remove`. Entries owned by another
user than the directory's (hopsd's own mode files) are neither counted nor
removed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from hopsd.daemon.spool import JOB_FILE
from hopsd.daemon.spool_reclaim import HOISTED, MAX_DEPTH, Tally
from hopsd.daemon.spool_reclaim import MAX_NAMES_SEARCHED as MAX_NAMES

MAX_FILE_BYTES = 8 * 1024 * 1024  # a job's report, <id>.jsonl
MAX_PROGRESS_BYTES = 64 * 1024  # the single progress file of jobs without the probe
MAX_MODE_BYTES = 4096  # what the probe reads of a mode file at most
FILE_LIMITS = {".jsonl": MAX_FILE_BYTES, ".progress.json": MAX_PROGRESS_BYTES}
FILE_LIMITS[".mode"] = MAX_MODE_BYTES
#: Room per job: its report at its quota, and as much again for everything else.
JOB_BUDGET_BYTES = 2 * MAX_FILE_BYTES
ENTRY_BYTES = 4096
UNCOUNTABLE = 1 << 62  # the cost of what cannot be counted: more than any budget

_JOB_PREFIX = re.compile(r"(\d{1,12})\.")


@dataclass(frozen=True)
class DirJobs:
    """One user's jobs as the spool sees them: whose files are protected, whose count."""

    running: frozenset[int] = frozenset()
    pending: frozenset[int] = frozenset()
    ended: frozenset[int] = frozenset()  # within their retention

    @property
    def budget(self) -> int:
        """Bytes the directory may hold: per running or kept ended job, at least one job's.

        Pending jobs add none (a user could queue thousands), though their files
        are kept before names of no job.
        """
        return JOB_BUDGET_BYTES * max(1, len(self.running | self.ended))

    def rank(self, name: str) -> int:
        """Which goes first past the budget: 0 a name of no job hopsd knows here,
        1 a pending or ended job's, 2 a running job's (not its own job files)."""
        match = _JOB_PREFIX.match(name)
        job = int(match.group(1)) if match else None
        if job in self.running:
            return 2
        return 1 if job in self.pending or job in self.ended else 0


@dataclass(frozen=True)
class Entry:
    """One name in the directory: what it costs against the budget and its own size."""

    name: str
    cost: int
    size: int
    regular: bool
    inode: int


def survey(dir_fd: int, uid: int) -> tuple[list[Entry], bool]:
    """The entries of the user ``uid`` in the directory, and False when there were too
    many names to look at them all (the directory is then over any budget)."""
    tally = Tally(MAX_NAMES)
    top = os.fstat(dir_fd)
    found: list[Entry] = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if not tally.take():
                return found, False
            info = _lstat(dir_fd, entry.name)
            if info is None or info.st_uid != uid:
                continue
            cost = _cost(dir_fd, entry.name, info, top.st_dev, 1, tally)
            if entry.name.startswith(HOISTED):
                cost = UNCOUNTABLE  # the rest of a tree hopsd is removing
            regular = stat.S_ISREG(info.st_mode)
            found.append(Entry(entry.name, cost, info.st_size, regular, info.st_ino))
    return found, True


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None  # gone meanwhile, or a mount hopsd may not look into


def _cost(dir_fd: int, name: str, info: os.stat_result, dev: int, depth: int, tally: Tally) -> int:
    """What an entry holds: its blocks (one block at least), a subdirectory's everything."""
    if not stat.S_ISDIR(info.st_mode):
        return max(info.st_blocks * 512, ENTRY_BYTES)
    if depth > MAX_DEPTH or info.st_dev != dev:
        return UNCOUNTABLE
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return ENTRY_BYTES  # swapped or gone meanwhile: counted again next tick
    total = ENTRY_BYTES
    try:
        if os.fstat(fd).st_dev != dev:
            return UNCOUNTABLE  # a filesystem mounted there meanwhile
        with os.scandir(fd) as entries:
            for entry in entries:
                if not tally.take():
                    return UNCOUNTABLE
                child = _lstat(fd, entry.name)
                if child is not None:
                    total += _cost(fd, entry.name, child, dev, depth + 1, tally)
    finally:
        os.close(fd)
    return min(total, UNCOUNTABLE)


def over_quota(entries: Iterable[Entry]) -> list[Entry]:
    """The job files past their own quota (:data:`FILE_LIMITS`), of any job."""
    out = []
    for entry in entries:
        match = JOB_FILE.fullmatch(entry.name)
        if entry.regular and match and entry.size > FILE_LIMITS[match.group(2)]:
            out.append(entry)
    return out


def to_remove(entries: list[Entry], jobs: DirJobs, complete: bool) -> list[Entry]:
    """What to remove, in order, so that the rest fits the directory's budget.

    Largest first within each :meth:`DirJobs.rank`; never a running job's own
    job file (each is held to its quota instead, and the budget has room for
    them). Nothing when the directory fits.
    """
    total = sum(e.cost for e in entries) if complete else UNCOUNTABLE
    budget = jobs.budget
    chosen = []
    for entry in sorted(
        (e for e in entries if not _protected(e, jobs)),
        key=lambda e: (jobs.rank(e.name), -e.cost),
    ):
        if total <= budget:
            break
        chosen.append(entry)
        total -= entry.cost
    return chosen


def _protected(entry: Entry, jobs: DirJobs) -> bool:
    match = JOB_FILE.fullmatch(entry.name)
    return entry.regular and match is not None and int(match.group(1)) in jobs.running
