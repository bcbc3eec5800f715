"""Spool hygiene: the files of finished jobs are removed after a delay.

A job leaves ``<id>.jsonl`` (the probe's reports), ``<id>.progress.json`` and
``<id>.mode`` (hopsd's profiling order) in its spool. Nothing reads them once
the job has ended, and a stale mode file could even steer a later job that
Slurm gives the same id, so hopsd removes them ``daemon.spool_retention_s``
after it recorded the job's end (long enough for the owner to look at them).

Removal goes through :func:`hopsd.daemon.spool.remove_files`: never through a
link, and in a job's own working directory only while that directory still
belongs to the job's user.

Ends are remembered in memory. For the admin's shared spool a restarted daemon
also sweeps its users' directories (every ``retention`` seconds at most): files
named after a job that is not active and untouched for the retention are
removed. Working directories cannot be swept that way (hopsd does not know them
after a restart); their files stay when the daemon restarted before the delay.

The sweep goes by age and leaves names it does not know; what a user's
directory may hold meanwhile (a file that keeps being written never looks
stale) is bounded by :mod:`hopsd.daemon.spool_audit`, every tick.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from hopsd.daemon.spool import JOB_FILE, JobSpool, UnsafeSpool, remove_files

log = logging.getLogger("hopsd.hygiene")

SUFFIXES = (".jsonl", ".progress.json", ".mode")

UidLookup = Callable[[str], int | None]


def spool_names(slurm_id: int) -> list[str]:
    """The spool files of one job."""
    return [f"{slurm_id}{suffix}" for suffix in SUFFIXES]


@dataclass(frozen=True)
class _Due:
    at: float
    spool: JobSpool
    user: str


class SpoolJanitor:
    """Remembers ended jobs and removes their spool files once their retention is over."""

    def __init__(self, uid_of: UidLookup) -> None:
        self.uid_of = uid_of
        self._due: dict[int, _Due] = {}
        self._last_scan: float | None = None

    def ended(self, slurm_id: int, spool: JobSpool | None, user: str, now: float) -> None:
        """A job ended now; its files go ``retention`` seconds later."""
        if spool is not None:
            self._due[slurm_id] = _Due(now, spool, user)

    def kept(self) -> dict[str, set[int]]:
        """The ended jobs whose files are kept in the shared spool, by user."""
        out: dict[str, set[int]] = {}
        for slurm_id, due in self._due.items():
            if due.spool.per_user:
                out.setdefault(due.user, set()).add(slurm_id)
        return out

    def sweep(self, now: float, retention_s: float, active: Collection[int]) -> list[int]:
        """Remove the files of jobs ended more than ``retention_s`` ago; their Slurm ids."""
        removed = []
        for slurm_id, due in list(self._due.items()):
            if now - due.at < retention_s:
                continue
            del self._due[slurm_id]
            if slurm_id in active:
                continue  # the id names a live job again (a fresh cluster): its files now
            if self._remove(slurm_id, due):
                removed.append(slurm_id)
        return removed

    def scan(
        self, directories: Sequence[Path], now: float, retention_s: float, active: Collection[int]
    ) -> int:
        """Remove stale job files from the shared spool's user directories.

        At most once per retention period (a minute at least) for all of them.
        """
        if self._last_scan is not None and now - self._last_scan < max(retention_s, 60.0):
            return 0
        self._last_scan = now
        return sum(self._scan_one(d, now, retention_s, active) for d in directories)

    @staticmethod
    def _scan_one(directory: Path, now: float, retention_s: float, active: Collection[int]) -> int:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return 0
        count = 0
        for entry in entries:
            match = JOB_FILE.fullmatch(entry.name)
            if match is None or int(match.group(1)) in active:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if now - info.st_mtime >= retention_s:
                remove_files(directory, [entry.name], None)
                count += 1
        if count:
            log.info("event=spool-swept directory=%s files=%d", directory, count)
        return count

    def _remove(self, slurm_id: int, due: _Due) -> bool:
        owner = self.uid_of(due.user) if due.spool.own else None
        if due.spool.own and owner is None:
            return False
        try:
            remove_files(due.spool.path, spool_names(slurm_id), owner)
        except UnsafeSpool as exc:
            log.warning("event=spool-kept slurm_job=%s reason=%r", slurm_id, str(exc))
            return False
        log.info("event=spool-cleaned slurm_job=%s directory=%s", slurm_id, due.spool.path)
        return True
