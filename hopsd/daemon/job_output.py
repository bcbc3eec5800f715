"""Did slurmstepd stop this run? The line it writes into the job's own output says so.

When a requeue reaches a batch script that is still running, slurmstepd writes
``*** JOB <id> ON <node> CANCELLED AT <time> DUE TO JOB REQUEUE ***`` into the
job's standard error (seen on the test cluster for every run a requeue
stopped, and missing for a run whose script had exited an instant before the
requeue reached its node). It is the last witness for the one case accounting
and Slurm's job record cannot settle: a script that ended in the same second
as the requeue, before slurmctld had heard of its end (:mod:`requeue_check`).

The file is the user's: it is read only when it is a regular file owned by the
job's user (never through a link), only its last 64 KiB, and only for the
marker of this job at this requeue. A user can only mislead hops about their
own job this way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from hopsd.daemon.spool import UnsafeSpool, read_owned
from hopsd.slurm.port import SlurmJob

log = logging.getLogger("hopsd.enact")

TAIL_BYTES = 64 * 1024
_MARKER = re.compile(rb"\*\*\* JOB (\d+) ON \S+ CANCELLED AT (\S+) DUE TO JOB REQUEUE \*\*\*")

UidLookup = Callable[[str], int | None]


def stopped_by_requeue(job: SlurmJob, requeued_at: float, uid_of: UidLookup) -> bool | None:
    """True: the output shows this requeue stopping the run; False: the output was read
    and shows no such line; None: no output could be read (no evidence either way)."""
    uid = uid_of(job.user)
    if uid is None:
        return None
    paths = [p for p in dict.fromkeys((job.stderr_path, job.stdout_path)) if p.startswith("/")]
    read_any = False
    for path in paths:
        tail = _tail(Path(path), uid)
        if tail is None:
            continue
        read_any = True
        if _has_marker(tail, job.job_id, requeued_at):
            return True
    return False if read_any else None


def _tail(path: Path, uid: int) -> bytes | None:
    try:
        _, size = read_owned(path, uid, 0)
        data, _ = read_owned(path, uid, TAIL_BYTES, max(size - TAIL_BYTES, 0))
    except (OSError, UnsafeSpool):
        return None
    return data


def _has_marker(tail: bytes, job_id: int, requeued_at: float) -> bool:
    for match in _MARKER.finditer(tail):
        if int(match.group(1)) != job_id:
            continue
        try:
            at = datetime.fromisoformat(match.group(2).decode("ascii")).timestamp()
        except (UnicodeDecodeError, ValueError):
            continue
        if abs(at - int(requeued_at)) <= 1.0:
            return True
    return False
