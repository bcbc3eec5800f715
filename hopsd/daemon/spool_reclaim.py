"""How hopsd frees the disk a spool file holds past its quota, touching no file outside the spool.

A name in the spool may be a second name (a hard link) of a file that also has
a name elsewhere, one its owner could write: truncating through the spool's
name would destroy that file, which hopsd never does. So hopsd truncates a
file only while no name of it lies outside the names it answers for:

* a file with this one name is emptied in place when its name is kept (a
  running job's report: the writer keeps its descriptor and carries on at the
  new end, where a removed file would go on filling the disk unseen);
* otherwise hopsd removes every name of the file it answers for in the
  directory (``unlink`` takes away a directory entry, never the data behind
  another name; :func:`discard` takes one name at a time, its caller deciding
  about each). A file left with no name at all was the spool's alone and is
  emptied as well -- a file with no name can never be given one again, so no
  name outside can come to hold it -- which frees its blocks even while a job
  still writes to it. A file left with names elsewhere keeps its data there,
  untouched; the spool simply no longer holds it.

Names are removed relative to the directory's descriptor and never through a
link. A name removed in a race (the job renamed another file of its own over
it in between) is still only a name hopsd answers for.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from hopsd.daemon.spool import JOB_FILE, UnsafeSpool, open_dir

#: Names of a directory looked at when hopsd searches it for a file's other names.
MAX_NAMES_SEARCHED = 16384
#: Levels of subdirectories hopsd clears in place; deeper ones are first moved up.
MAX_DEPTH = 8
#: The name a subdirectory moved up gets (:func:`discard`): removed in turn when next seen.
HOISTED = ".hops-deep-"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Ours = Callable[[str], bool]
#: Where to look for a file's other names in a directory (by its descriptor and the
#: file's stat): names hopsd answers for that may be the same file (checked after).
Others = Callable[[int, os.stat_result], Iterable[str]]


class Tally:
    """Names hopsd may still look at (or remove) in one directory this tick: the work per
    tick stays bounded however many names a job makes; the rest waits for the next."""

    def __init__(self, names: int = MAX_NAMES_SEARCHED) -> None:
        self.left = names

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


@dataclass(frozen=True)
class Reclaimed:
    """What became of one file hopsd reclaimed, for the message to its owner."""

    size: int
    emptied: bool
    removed: tuple[str, ...] = ()
    elsewhere: int = 0

    def describe(self, name: str) -> str:
        """One clause for the owner: what hopsd did to ``name`` and what it left."""
        if not self.removed:
            left = "emptied" if self.emptied else "left as it was (changed meanwhile)"
            return f"{name} of {self.size} bytes {left}"
        names = ", ".join(self.removed)
        if self.elsewhere:
            return (
                f"{name} of {self.size} bytes taken out of the spool (removed: {names}); "
                f"its data stays under its {self.elsewhere} other name(s), which hopsd "
                "leaves alone"
            )
        freed = "emptied and removed" if self.emptied else "removed"
        return f"{name} of {self.size} bytes {freed} (names: {names})"


def answers_for(per_user: bool) -> Ours:
    """The names hopsd answers for in a job's spool directory.

    Every name in a user's directory of the shared spool (hopsd made it for
    hops's files alone), only job files (``<id>.jsonl``...) in a working
    directory, which is the user's own.
    """
    if per_user:
        return lambda _name: True
    return lambda name: JOB_FILE.fullmatch(name) is not None


def searched(ours: Ours) -> Others:
    """Other names found by reading the directory (a bounded search), those hopsd answers for."""
    return lambda dir_fd, info: [n for n in _names_of(dir_fd, info) if ours(n)]


def none_searched(_dir_fd: int, _info: os.stat_result) -> Iterable[str]:
    """No other names: a file's names in the directory are each dealt with on their own."""
    return ()


def reclaim_in(
    directory: Path, name: str, uid: int, *, keep_name: bool, per_user: bool
) -> Reclaimed:
    """:func:`reclaim` in ``directory``, which must still belong to the job's user ``uid``."""
    dir_fd = open_dir(directory, uid)
    try:
        others = searched(answers_for(per_user))
        return reclaim(dir_fd, name, uid, keep_name=keep_name, others=others)
    finally:
        os.close(dir_fd)


def reclaim(dir_fd: int, name: str, uid: int, *, keep_name: bool, others: Others) -> Reclaimed:
    """Free the disk ``dir_fd/name`` holds, per the rules above; what was done.

    ``uid``: the file must be a regular file of that user (the job's), checked
    on the opened descriptor. ``others``: where to find the file's other names
    hopsd answers for (every name in a user's spool directory, only job files
    in a working directory: :func:`answers_for`). Raises :class:`UnsafeSpool`
    saying why a file is left alone.
    """
    fd, writable = _open(dir_fd, name)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
            raise UnsafeSpool("not a regular file of the job's user")
        if keep_name and info.st_nlink == 1 and writable:
            os.ftruncate(fd, 0)
            return Reclaimed(info.st_size, emptied=True)
        removed = _unlink_names(dir_fd, name, info, others)
        left = os.fstat(fd).st_nlink
        if left == 0 and writable:
            os.ftruncate(fd, 0)
        return Reclaimed(info.st_size, left == 0 and writable, removed, left)
    finally:
        os.close(fd)


def _open(dir_fd: int, name: str) -> tuple[int, bool]:
    """A descriptor of the file (never through a link), and whether it may be truncated."""
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        return os.open(name, os.O_WRONLY | flags, dir_fd=dir_fd), True
    except PermissionError:
        pass  # hopsd as the user itself, on a file the job made read-only: remove it only
    except OSError as exc:
        raise UnsafeSpool(f"cannot open it to enforce its quota: {exc.strerror or exc}") from exc
    try:
        return os.open(name, os.O_RDONLY | flags, dir_fd=dir_fd), False
    except OSError as exc:
        raise UnsafeSpool(f"cannot open it to enforce its quota: {exc.strerror or exc}") from exc


def _unlink_names(dir_fd: int, name: str, info: os.stat_result, others: Others) -> tuple[str, ...]:
    """Remove ``name`` and the other names of the same file ``others`` finds."""
    names = [name] if _same_file(dir_fd, name, info) else []
    if info.st_nlink > 1:
        names += [n for n in others(dir_fd, info) if n != name and _same_file(dir_fd, n, info)]
    removed = []
    for each in names:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(each, dir_fd=dir_fd)
            removed.append(each)
    return tuple(removed)


def _same_file(dir_fd: int, name: str, info: os.stat_result) -> bool:
    try:
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def _names_of(dir_fd: int, info: os.stat_result) -> list[str]:
    """The names in the directory with the inode number of ``info`` (a bounded search)."""
    with os.scandir(dir_fd) as entries:
        return [
            e.name
            for e in itertools.islice(entries, MAX_NAMES_SEARCHED)
            if e.inode() == info.st_ino
        ]


def discard(dir_fd: int, name: str, uid: int, work: Tally) -> None:
    """Remove ``name`` from a user's spool directory, whatever it is, freeing what it held.

    A file of the user is reclaimed (:func:`reclaim`: emptied once no name of it
    is left, never when it has a name elsewhere); anything else is unlinked. A
    subdirectory is cleared the same way and removed, through descriptors
    opened without following links. One more than :data:`MAX_DEPTH` levels
    down is moved up into the user's directory instead (under a fresh hidden
    name, as the user's), to be removed on a later call: so no tree is too deep
    to remove, and no call holds more than a few descriptors open. ``work``
    bounds the names handled, shared by the calls of one audit.
    """
    _discard(dir_fd, name, uid, _Walk(dir_fd, work), 1)


@dataclass(frozen=True)
class _Walk:
    """What every level of a removal shares: the user's directory and the work left."""

    top_fd: int
    work: Tally


def _discard(dir_fd: int, name: str, uid: int, walk: _Walk, depth: int) -> None:
    if not walk.work.take():
        return
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        _discard_dir(dir_fd, name, info, uid, walk, depth)
        return
    if stat.S_ISREG(info.st_mode) and info.st_uid == uid:
        with contextlib.suppress(UnsafeSpool):
            reclaim(dir_fd, name, uid, keep_name=False, others=none_searched)
            return
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        os.unlink(name, dir_fd=dir_fd)


def _discard_dir(
    dir_fd: int, name: str, info: os.stat_result, uid: int, walk: _Walk, depth: int
) -> None:
    top_fd = walk.top_fd
    if info.st_dev != os.fstat(top_fd).st_dev:
        return  # another filesystem mounted there: not hopsd's to clear
    if depth > MAX_DEPTH:
        with contextlib.suppress(OSError):
            os.rename(name, f"{HOISTED}{uuid.uuid4().hex}", src_dir_fd=dir_fd, dst_dir_fd=top_fd)
        return
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return  # swapped meanwhile: looked at again next time
        with os.scandir(fd) as entries:
            names = [e.name for e in itertools.islice(entries, MAX_NAMES_SEARCHED)]
        for each in names:
            _discard(fd, each, uid, walk, depth + 1)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=dir_fd)
