"""``torchrun`` that passes hops's notice on to its workers: ``python -m hops_probe.torchrun``.

Slurm signals a batch script's process group, and ``srun`` a step's tasks;
torchrun starts each worker in a session of its own, so neither reaches them:
a worker under plain torchrun never hears hops's notice (measured: the
signal came, the workers trained on, and the job was requeued at the end of
its grace without a checkpoint). This launcher is torchrun itself (same
options, ``torch.distributed.run``) with one addition: on the notice signal
(``HOPS_NOTICE_SIGNAL``, USR1 by default) it sends the same signal to every
process it started, whose probes then take it as if it came from Slurm.

When Slurm then requeues the job it ends the run with SIGTERM, which torchrun
answers with a page of traceback in the job's output at every move. Here
that is one line: the run was stopped, which under hops is how a move or a
preemption ends a run after its checkpoint.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path
from typing import Any

from hops_probe import ignore_at_exit

__all__ = ["descendants", "main"]


def _parents() -> dict[int, int]:
    """``{pid: parent pid}`` of every process, from ``/proc/<pid>/stat``."""
    out: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1].isdigit():
            out[int(entry.name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    """Every process below ``root``, children first."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _forward(signum: int, frame: Any) -> None:
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            continue


def main(argv: list[str] | None = None) -> None:
    name = os.environ.get("HOPS_NOTICE_SIGNAL", "USR1").strip().upper()
    name = name[3:] if name.startswith("SIG") else name
    number = getattr(signal, "SIG" + name, None)
    if isinstance(number, signal.Signals):
        signal.signal(number, _forward)
        atexit.register(ignore_at_exit, number)  # the workers are done when it runs
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv if argv is not None else sys.argv[1:])
    except SignalException as stop:
        sys.stderr.write(f"hops_probe.torchrun: stopped by {stop.sigval.name}, workers ended\n")
        sys.exit(128 + int(stop.sigval))


if __name__ == "__main__":
    main()
