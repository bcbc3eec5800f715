"""Helpers of the live tests of a centre's Slurm: jobs hops does not manage, drains, reservations.

Every change made to a node or a reservation is undone by the test that made it
(``with drained(...)``, ``with reserved(...)``), so a failing test leaves the
test cluster as it found it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from daemon_live import LiveEnv


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], check=True, capture_output=True, timeout=20)


def foreign(env: LiveEnv, *args: str, seconds: int = 300, user: str | None = None) -> int:
    """A plain ``sbatch`` job (no hops tag) holding GPUs until it ends or the test cancels it."""
    prefix = ["runuser", "-u", user, "--"] if user else []
    out = subprocess.run(
        [
            *prefix,
            "sbatch",
            "--parsable",
            "-J",
            f"{env.prefix}foreign",
            "-o",
            "/dev/null",
            "-t",
            "5",
            *args,
            "--wrap",
            f"sleep {seconds}",
        ],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
        cwd="/tmp",
    )
    job = int(out.stdout.strip().split(";")[0])
    env.blockers.append(job)
    return job


def slurm_states(env: LiveEnv) -> dict[int, tuple[str, bool, dict[str, int]]]:
    """Per job: Slurm's state, whether it is held, and its GPUs per node."""
    return {j.job_id: (j.state, j.held, j.placement) for j in env.port.list_jobs()}


def wait_running(env: LiveEnv, jobs: list[int], deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        states = slurm_states(env)
        if all(states.get(j, ("",))[0] == "RUNNING" for j in jobs):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {jobs} not running: {slurm_states(env)}")


@contextmanager
def drained(node: str) -> Iterator[None]:
    """``node`` drained (its jobs run on) until the block ends, then resumed."""
    scontrol("update", f"nodename={node}", "state=drain", "reason=hops-live-test")
    try:
        yield
    finally:
        resume(node)


def resume(node: str) -> None:
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=resume"],
        capture_output=True,
        timeout=20,
        check=False,  # already resumed: Slurm says so, and that is fine
    )


@contextmanager
def reserved(name: str, nodes: str, start_in_s: int, minutes: int = 30) -> Iterator[None]:
    """A maintenance reservation (root only) on ``nodes`` from ``start_in_s`` from now."""
    scontrol(
        "create",
        "reservation",
        f"reservationname={name}",
        f"starttime=now+{start_in_s}",
        f"duration={minutes}",
        f"nodes={nodes}",
        "flags=maint,ignore_jobs",
        "users=root",
    )
    try:
        yield
    finally:
        subprocess.run(
            ["scontrol", "delete", f"reservation={name}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
