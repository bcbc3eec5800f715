"""Files the probe touches where another user may have been first.

A job's spool or working directory may be shared or world-writable. The probe
never follows a link, writes only to a regular file it owns with no other name
(so it never truncates anyone else's file), and trusts a file hopsd left for it
only when root, hopsd or the job's own user owns it. Standard library only,
Python 3.8, as the rest of the probe.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def open_own_file(path: Path, flags: int) -> int:
    """A descriptor of ``path`` if it is a regular file this process's user owns, alone.

    Opened without following a final link (``O_NOFOLLOW``), then checked on the
    descriptor, so nothing can be swapped in between: a link, a device, a file
    of another owner (one planted in a shared directory) or one with a second
    name (a hard link to someone's file) raises ``OSError`` and is left as it was.
    """
    fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC, 0o644)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path}: not a regular file")
        if info.st_uid != os.geteuid():
            raise OSError(f"{path}: owned by uid {info.st_uid}, not this job's user")
        if info.st_nlink != 1:
            raise OSError(f"{path}: has {info.st_nlink} names")
    except BaseException:
        os.close(fd)
        raise
    return fd


def trusted_owners(spool: Path, shared: bool) -> frozenset[int]:
    """Who may have written this job's mode file: root, the job's user, and hopsd.

    hopsd is the owner of the shared spool, the parent of the user's directory
    ``$HOPS_SPOOL_DIR``. In a job's working directory only root and the user count.
    """
    owners = {0, os.geteuid()}
    if shared:
        with contextlib.suppress(OSError):
            owners.add(os.stat(spool.parent).st_uid)
    return frozenset(owners)
