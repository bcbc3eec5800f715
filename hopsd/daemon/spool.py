"""Where each job's report and mode files live, and how hopsd touches them safely.

hops.conf ``[daemon] spool_dir`` names one directory for every job's files; left
empty (the default) each job uses its own Slurm working directory, which is
where :mod:`hops_probe` writes when ``HOPS_SPOOL_DIR`` is unset.

The shared spool is hopsd's own: created (or checked) at start by
:func:`prepare_root` -- owned by hopsd's user, writable by nobody else, and
reached through no directory another user could swap. Jobs never write into it
directly: each user gets ``<spool_dir>/<user>/``, made by hopsd before it
releases that user's first job, owned by the user and mode 0700
(:func:`ensure_user_dir`). So no user can create, plant or link a file in
another user's directory, and a job id squatted in advance names nothing: the
file hops reads for a job is always in its own user's directory. Mode files
hopsd writes there stay hopsd's (the probe trusts no other owner). What
each user's directory may hold is bounded by :mod:`hopsd.daemon.spool_budget`.

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
import pwd
import re
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

#: User names hopsd makes a spool directory for (a name is a path component).
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
_GROUP_OR_OTHER_WRITE = stat.S_IWGRP | stat.S_IWOTH
#: The names of a job's files: ``<slurm id>.jsonl``, ``.progress.json`` and ``.mode``.
JOB_FILE = re.compile(r"(\d{1,12})(\.jsonl|\.progress\.json|\.mode)")


class UnsafeSpool(OSError):
    """A file or directory hopsd refuses to use, with the reason."""


def system_uid(user: str) -> int | None:
    """The uid of a user name, or None when the system does not know it."""
    try:
        return pwd.getpwnam(user).pw_uid
    except (KeyError, TypeError):
        return None


@dataclass(frozen=True)
class JobSpool:
    """One job's spool directory, and whether it belongs to the job's user.

    ``own``: the directory is the user's (their working directory, or their
    directory in the shared spool), so it must still be theirs when hopsd
    writes or removes there. ``per_user``: it is the user's directory in the
    shared spool, where mode files stay hopsd's instead of being handed over.
    """

    path: Path
    own: bool
    per_user: bool = False


def prepare_root(root: Path) -> None:
    """Create the shared spool if missing, then refuse it unless only hopsd can write it.

    Raises :class:`UnsafeSpool` with the reason: not an absolute path, a link,
    not a directory, another owner than hopsd's user, writable by group or
    others, or below a directory another user could rename it out of.
    """
    if not root.is_absolute():
        raise UnsafeSpool(f"{root} is not an absolute path")
    if not os.path.lexists(root):
        try:
            root.mkdir(mode=0o755, parents=True)
            os.chmod(root, 0o755, follow_symlinks=False)
        except OSError as exc:
            raise UnsafeSpool(f"cannot create {root}: {exc.strerror or exc}") from exc
    check_root(root)


def check_root(root: Path) -> None:
    """Refuse an existing shared spool unless only hopsd can write it (creates nothing).

    The rules of :func:`prepare_root` once the directory exists; ``hopsd
    --check`` calls it as is, so what it reports is what hopsd will require.
    """
    info = os.lstat(root)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeSpool(f"{root} is a symbolic link; name the directory itself")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeSpool(f"{root} is not a directory")
    if info.st_uid != os.geteuid():
        raise UnsafeSpool(f"{root} is owned by uid {info.st_uid}; hopsd runs as uid {os.geteuid()}")
    if info.st_mode & _GROUP_OR_OTHER_WRITE:
        raise UnsafeSpool(
            f"{root} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            "hopsd gives each user a directory of their own inside it: chmod 755 it"
        )
    for parent in root.parents:
        _check_ancestor(parent)


def check_creatable_root(root: Path) -> None:
    """A shared spool that does not exist yet: could :func:`prepare_root` make a safe one?

    Its existing ancestors pass the same rules as a spool's, and the nearest
    one is writable by hopsd's user (``mkdir -p`` starts there).
    """
    if not root.is_absolute():
        raise UnsafeSpool(f"{root} is not an absolute path")
    existing = next(p for p in root.parents if os.path.lexists(p))
    for parent in (existing, *existing.parents):
        _check_ancestor(parent)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UnsafeSpool(f"cannot create {root}: {existing} is not writable by uid {os.geteuid()}")


def _check_ancestor(parent: Path) -> None:
    """A directory above the spool: others must not be able to rename the spool away."""
    info = os.stat(parent)
    if info.st_uid not in (0, os.geteuid()):
        raise UnsafeSpool(f"{parent}, above the spool, is owned by uid {info.st_uid}")
    if info.st_mode & _GROUP_OR_OTHER_WRITE and not info.st_mode & stat.S_ISVTX:
        raise UnsafeSpool(f"{parent}, above the spool, is writable by others, not sticky")


def ensure_user_dir(root: Path, user: str, uid: int) -> Path:
    """``root/user``: created if missing, the user's, mode 0700 (no group/other write).

    Works through descriptors opened without following links, so a name
    planted in ``root`` (only hopsd can write there) could not redirect it
    anyway. A directory with a third owner is refused; hopsd not running as
    root can serve only its own user (it cannot give a directory away).
    """
    if not _USER_NAME.fullmatch(user):
        raise UnsafeSpool(f"user name {user!r} cannot name a spool directory")
    if uid != os.geteuid() and os.geteuid() != 0:
        raise UnsafeSpool(f"hopsd is not root: cannot give user {user!r} a spool directory")
    root_fd = open_dir(root, os.geteuid())
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(user, 0o700, dir_fd=root_fd)
        try:
            fd = os.open(user, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
        except OSError as exc:
            raise UnsafeSpool(f"{root / user}: {exc.strerror or exc}") from exc
    finally:
        os.close(root_fd)
    try:
        info = os.fstat(fd)
        if info.st_uid not in (uid, os.geteuid()):
            raise UnsafeSpool(f"{root / user} is owned by uid {info.st_uid}, not {user!r}")
        if info.st_uid != uid:
            os.fchown(fd, uid, _gid_of(uid))
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return root / user


def _gid_of(uid: int) -> int:
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return -1


class Spools:
    """Resolves a job's spool directory: its user's in the shared spool, or its working one.

    Users and working directories come from the jobs observed each tick
    (:meth:`note`), which also makes each user's shared-spool directory before
    hopsd can release that user's job. A job that left the queue keeps its
    directory for the tick in which it is seen gone, so its last report can
    still be read when the job is ended.
    """

    def __init__(
        self,
        shared: Path | None,
        problems: InputProblems | None = None,
        uid_of: UidLookup = system_uid,
    ) -> None:
        self.shared = shared
        self.problems = problems
        self.uid_of = uid_of
        self._dirs: dict[int, str] = {}
        self._gone: dict[int, str] = {}
        self._users: dict[int, str] = {}
        self._gone_users: dict[int, str] = {}
        self._busy: set[int] = set()
        self._ready: set[tuple[Path, str]] = set()
        self._refused: set[int] = set()

    def note(self, jobs: Iterable[ObservedJob]) -> None:
        """Remember this tick's hops jobs: their users and (usable) working directories.

        A directory :func:`hopsd.userdata.work_dir_problem` refuses is reported
        once per job when no shared spool is configured (it would be the spool).
        """
        current: dict[int, str] = {}
        users: dict[int, str] = {}
        busy: set[int] = set()
        seen: set[int] = set()
        for job in jobs:
            seen.add(job.slurm_id)
            if not job.claims_hops:
                continue
            if self.shared is not None:
                if self._user_dir_ready(job):
                    users[job.slurm_id] = job.user
                    if job.busy:
                        busy.add(job.slurm_id)
                continue
            if not job.work_dir:
                continue
            problem = work_dir_problem(job.work_dir)
            if not problem:
                current[job.slurm_id] = job.work_dir
            elif job.slurm_id not in self._refused:
                self._refused.add(job.slurm_id)
                if self.problems is not None:
                    self.problems.note(job.slurm_id, problem, "work_dir")
        self._gone = {k: v for k, v in self._dirs.items() if k not in current}
        self._dirs = current
        self._gone_users = {k: v for k, v in self._users.items() if k not in users}
        self._users = users
        self._busy = busy
        self._refused &= seen  # bounded by the jobs Slurm still lists

    def _user_dir_ready(self, job: ObservedJob) -> bool:
        """Make (once) the job's user's directory in the shared spool; False when refused."""
        assert self.shared is not None
        key = (self.shared, job.user)
        if key in self._ready:
            return True
        uid = self.uid_of(job.user)
        try:
            if uid is None:
                raise UnsafeSpool(f"user {job.user!r} unknown to the system")
            ensure_user_dir(self.shared, job.user, uid)
        except OSError as exc:
            if job.slurm_id not in self._refused:
                self._refused.add(job.slurm_id)
                if self.problems is not None:
                    self.problems.note(job.slurm_id, f"spool: {exc}", "spool")
            return False
        self._ready.add(key)
        return True

    def of(self, slurm_id: int) -> JobSpool | None:
        """The job's spool, or None when its user's or working directory is unknown or unusable."""
        if self.shared is not None:
            user = self._users.get(slurm_id) or self._gone_users.get(slurm_id)
            if not user:
                return None
            return JobSpool(self.shared / user, own=True, per_user=True)
        work_dir = self._dirs.get(slurm_id) or self._gone.get(slurm_id)
        if not work_dir or work_dir_problem(work_dir):
            return None
        return JobSpool(Path(work_dir), own=True)

    def users_jobs(self) -> dict[str, tuple[set[int], set[int]]]:
        """Each user's hops jobs of this tick in the shared spool: (running, pending) ids.

        Running means holding GPUs (:attr:`ObservedJob.busy`); a job seen gone
        this tick is in neither.
        """
        out: dict[str, tuple[set[int], set[int]]] = {}
        for slurm_id, user in self._users.items():
            running, pending = out.setdefault(user, (set(), set()))
            (running if slurm_id in self._busy else pending).add(slurm_id)
        return out

    def user_dirs(self) -> list[Path]:
        """The per-user directories of the shared spool (for the sweep; none without one)."""
        if self.shared is None:
            return []
        try:
            entries = list(os.scandir(self.shared))
        except OSError:
            return []
        return sorted(
            Path(e.path)
            for e in entries
            if _USER_NAME.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
        )


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


def open_dir(directory: Path, owner_uid: int | None) -> int:
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


def write_file(
    directory: Path, name: str, data: bytes, owner_uid: int | None, *, give: bool = True
) -> None:
    """Atomically (re)write ``directory/name`` without following any link planted there.

    With ``owner_uid`` the directory must belong to that user (the job's own
    working directory or their shared-spool directory). With ``give`` the file
    is handed to the user when hopsd runs as root, so the user can remove it
    like any file of theirs; without, it stays hopsd's, so the job can tell it
    from a file anyone else wrote.
    """
    dir_fd = open_dir(directory, owner_uid)
    tmp = f".{name}.{uuid.uuid4().hex}"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
        except OSError as exc:
            raise UnsafeSpool(f"cannot create a file in {directory}: {exc.strerror}") from exc
        try:
            os.write(fd, data)
            if give and owner_uid is not None and os.geteuid() == 0:
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
    dir_fd = open_dir(directory, owner_uid)
    try:
        for name in names:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
