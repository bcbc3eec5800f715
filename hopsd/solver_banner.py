"""Keep the MILP solver's start-up banner off stdout.

HiGHS writes a licence banner to file descriptor 1 when the first solver of a
process is created, before any option can switch output off. That would
corrupt ``--json`` output and structured logs, so the programs (never the pure
core) create that first solver once with stdout pointed at /dev/null.
"""

from __future__ import annotations

import os
import sys

_silenced = False


def silence_solver_banner() -> None:
    """Create the process's first HiGHS instance with fd 1 redirected; idempotent."""
    global _silenced
    if _silenced:
        return
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()  # type: ignore[no-untyped-call, unused-ignore]
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    _silenced = True
