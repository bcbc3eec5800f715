"""A notice that comes while a finished training program exits does not kill it.

While Python shuts down it puts a signal's default action back before the
process is gone: for ``USR1`` that is to terminate, and Slurm records a job
killed so as FAILED although its work was done (seen live: a job that finished
its samples inside a profiling run hops ended as it exited). The probe ignores
the notice signal from the program's end on (:func:`hops_probe.ignore_at_exit`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

PROGRAM = """
import sys
from hops_probe import _install_notice

class Heard:
    _notice = False
    notices_heard = 0

_install_notice("USR1", Heard())
junk = [object() for _ in range(2_000_000)]  # a shutdown that takes a while
print("ready", flush=True)
sys.stdin.readline()
"""


def _exit_under_notices() -> int:
    """The program's exit status when notices keep coming from the moment it is told to end."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.stdin.write("end\n")
    proc.stdin.flush()
    while proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGUSR1)
        except ProcessLookupError:
            break
    return proc.wait()


def test_notices_while_the_program_exits_leave_its_status_zero() -> None:
    assert [_exit_under_notices() for _ in range(3)] == [0, 0, 0]
