"""Names of lease holders (``HOST:PID``), and whether one is a process gone from this host.

A holder killed with SIGKILL leaves its lease row behind until it runs out. On
the holder's own host hops can tell it is gone at once: the takeover of
``hopsd`` and the leader ``hops status`` names both ask here.
"""

from __future__ import annotations

import os
import socket


def holder_name() -> str:
    """This process as a lease holder."""
    return f"{socket.gethostname()}:{os.getpid()}"


def local_dead(holder: str | None) -> bool:
    """The holder is a process of this host that no longer runs (killed or crashed)."""
    if not holder or ":" not in holder:
        return False
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False
