"""The daemon's tick on the in-memory Slurm, reading the shared spool as the test's user."""

from __future__ import annotations

import os
from pathlib import Path

from daemon_fakeport import FakePort

from hopsd.config import HopsConfig
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.tick import Tick
from hopsd.ledger.jobs import get_job


def make_tick(config: HopsConfig, port: FakePort, sessions, clock) -> Tick:  # type: ignore[no-untyped-def]
    """The daemon's tick, reading the shared spool as if every job's user were the test's."""
    sensing = Sensing(Path(config.spool_dir), uid_of=lambda user: os.getuid())
    return Tick(config, port, sessions, clock=clock, sensing=sensing)


def row_of(sessions, job: int):  # type: ignore[no-untyped-def]
    """The job's ledger row, detached from its session."""
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None
        s.expunge(row)
        return row
