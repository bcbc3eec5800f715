"""Where each job's report and mode files live, and how hopsd touches them safely.

hops.conf ``[daemon] spool_dir`` names one directory for every job's files; left
empty (the default) each job uses its own Slurm working directory, which is
where :mod:`hopsd.probe` writes when ``HOPS_SPOOL_DIR`` is unset.

A working directory belongs to the job's user, and hopsd usually runs as root
or an operator, so everything here assumes the directory may be hostile:

* files are read only through a descriptor opened with ``O_NOFOLLOW`` and
  ``O_NONBLOCK``, and the *opened* file must be a regular file owned by the
  job's user and within a size limit (checking the path first and opening it
  afterwards would let the user swap the file in between);
* mode files are written only into a directory (opened without following a
  final link) that is owned by the job's user, relative to that directory's
  descriptor: a fresh temporary name created with ``O_CREAT | O_EXCL |
  O_NOFOLLOW``, handed to the user when hopsd runs as root, then renamed over
  the mode file (a rename replaces a planted link, it never follows it);
* in the admin's shared spool the directory is the admin's, so only the
  no-follow and exclusive-create rules apply there.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hopsd.daemon.views import ObservedJob
from hopsd.userdata import work_dir_problem

if TYPE_CHECKING:
    from hopsd.daemon.problems import InputProblems

UidLookup = Callable[[str], int | None]


class UnsafeSpool(OSError):
    """A file or directory hopsd refuses to use, with the reason."""


@dataclass(frozen=True)
class JobSpool:
    """One job's spool directory, and whether it is the job's own (working) directory."""

    path: Path
    own: bool


class Spools:
    """Resolves a job's spool directory: the shared spool, or its working directory.

    Working directories come from the jobs observed each tick (:meth:`note`). A
    job that left the queue keeps its directory for the tick in which it is seen
    gone, so its last report can still be read when the job is ended.
    """

    def __init__(self, shared: Path | None, problems: InputProblems | None = None) -> None:
        self.shared = shared
        self.problems = problems
        self._dirs: dict[int, str] = {}
        self._gone: dict[int, str] = {}
        self._refused: set[int] = set()

    def note(self, jobs: Iterable[ObservedJob]) -> None:
        """Remember the working directories of this tick's hops jobs (only usable ones).

        A directory :func:`hopsd.userdata.work_dir_problem` refuses is reported
        once per job when no shared spool is configured (it would be the spool).
        """
        current: dict[int, str] = {}
        seen: set[int] = set()
        for job in jobs:
            seen.add(job.slurm_id)
            if not (job.claims_hops and job.work_dir):
                continue
            problem = work_dir_problem(job.work_dir)
            if not problem:
                current[job.slurm_id] = job.work_dir
            elif self.shared is None and job.slurm_id not in self._refused:
                self._refused.add(job.slurm_id)
                if self.problems is not None:
                    self.problems.note(job.slurm_id, problem, "work_dir")
        self._gone = {k: v for k, v in self._dirs.items() if k not in current}
        self._dirs = current
        self._refused &= seen  # bounded by the jobs Slurm still lists

    def of(self, slurm_id: int) -> JobSpool | None:
        """The job's spool, or None when its working directory is unknown or unusable."""
        if self.shared is not None:
            return JobSpool(self.shared, own=False)
        work_dir = self._dirs.get(slurm_id) or self._gone.get(slurm_id)
        if not work_dir or work_dir_problem(work_dir):
            return None
        return JobSpool(Path(work_dir), own=True)


def read_owned(path: Path, uid: int, limit: int, start: int = 0) -> tuple[bytes, int]:
    """Up to ``limit`` bytes from ``start`` of a regular file owned by ``uid``, and its size.

    Raises :class:`UnsafeSpool` naming the problem (link, not a regular file,
    another owner, too large a start) and ``OSError`` when it cannot be opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeSpool("a symbolic link") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeSpool("not a regular file")
        if info.st_uid != uid:
            raise UnsafeSpool(f"owned by uid {info.st_uid}, the job's user is uid {uid}")
        if 0 < start <= info.st_size:
            os.lseek(fd, start, os.SEEK_SET)
        elif start > info.st_size:
            return b"", info.st_size
        return os.read(fd, limit), info.st_size
    finally:
        os.close(fd)


def _open_dir(directory: Path, owner_uid: int | None) -> int:
    """A descriptor of ``directory`` (never through a final link), checked for its owner."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise UnsafeSpool(f"cannot open directory {directory}: {exc.strerror or exc}") from exc
    info = os.fstat(fd)
    if owner_uid is not None and info.st_uid != owner_uid:
        os.close(fd)
        raise UnsafeSpool(
            f"directory {directory} is owned by uid {info.st_uid}, not the job's user {owner_uid}"
        )
    return fd


def write_file(directory: Path, name: str, data: bytes, owner_uid: int | None) -> None:
    """Atomically (re)write ``directory/name`` without following any link planted there.

    With ``owner_uid`` the directory must belong to that user (the job's own
    working directory), and the file is handed to the user when hopsd runs as
    root, so the user can remove it like any file of theirs.
    """
    dir_fd = _open_dir(directory, owner_uid)
    tmp = f".{name}.{uuid.uuid4().hex}"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
        except OSError as exc:
            raise UnsafeSpool(f"cannot create a file in {directory}: {exc.strerror}") from exc
        try:
            os.write(fd, data)
            if owner_uid is not None and os.geteuid() == 0:
                os.fchown(fd, owner_uid, os.fstat(dir_fd).st_gid)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    finally:
        os.close(dir_fd)


def remove_file(directory: Path, name: str) -> None:
    """Remove ``directory/name`` if present (unlink never follows a link)."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def remove_files(directory: Path, names: Iterable[str], owner_uid: int | None) -> None:
    """Remove ``directory/name`` for each name present, relative to the directory's descriptor.

    With ``owner_uid`` the directory must still belong to that user (a job's own
    working directory); :class:`UnsafeSpool` says why it does not. Unlink never
    follows a link, and a name that is a directory is left alone.
    """
    dir_fd = _open_dir(directory, owner_uid)
    try:
        for name in names:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
