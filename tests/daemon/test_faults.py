"""The injection port: where the tick and the enactor call an injected fault, and the launcher.

The live crash tests kill hopsd through these calls (:mod:`faulty_hopsd`); here
an in-memory Slurm shows they come at the points those tests mean: the first
once the intents are committed and before any Slurm call, the other after each
Slurm action, counted, and that a daemon stopped at either starts nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from daemon_fakeport import FakePort
from faulty_hopsd import Crash, hooks_and_rest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hopsd.daemon.faults import NoFaults
from hopsd.daemon.tick import Tick
from hopsd.ledger.models import IntentRow, IntentState
from hopsd.slurm.tag import HopsTag


class Died(Exception):
    """Stands for the SIGKILL of the launcher's faults: nothing after it runs."""


@dataclass
class Recorder:
    """Faults that note what Slurm and the ledger had seen at each call, and may die at one."""

    port: FakePort
    sessions: sessionmaker[Session]
    die_after_intents: bool = False
    die_after: int | None = None
    seen: list[tuple[str, int, int]] = field(default_factory=list)

    def intents_committed(self) -> None:
        self.seen.append(("intents", len(self.port.calls), pending(self.sessions)))
        if self.die_after_intents:
            raise Died

    def action_taken(self, count: int) -> None:
        self.seen.append(("action", count, len(self.port.calls)))
        if self.die_after == count:
            raise Died


def pending(sessions: sessionmaker[Session]) -> int:
    with sessions.begin() as s:
        rows = s.scalars(select(IntentRow).where(IntentRow.state == IntentState.PENDING))
        return len(rows.all())


def tick(config, port, sessions, clock, **faults) -> Tick:  # type: ignore[no-untyped-def]
    """A tick with :class:`Recorder` faults (``die_after...``), or none if not asked."""
    hooks = Recorder(port, sessions, **faults)
    return Tick(config, port, sessions, clock=clock, faults=hooks)


def test_faults_come_after_the_commit_and_after_each_slurm_action(config, port, sessions, clock):
    job = port.add_job(HopsTag((1, 2), 10_000))
    first = tick(config, port, sessions, clock)
    first.run_once()
    assert port.actions(job) == ["update", "release"]
    # intents committed (two pending), no Slurm call yet; then one call per action
    assert isinstance(first.faults, Recorder)
    assert first.faults.seen == [("intents", 0, 2), ("action", 1, 1), ("action", 2, 2)]


def test_a_daemon_dead_after_the_commit_is_resumed_without_a_second_start(
    config, port, sessions, clock
):
    job = port.add_job(HopsTag((1, 2), 10_000))
    with pytest.raises(Died):
        tick(config, port, sessions, clock, die_after_intents=True).run_once()
    assert port.actions(job) == [] and pending(sessions) == 2
    clock.advance(1)
    Tick(config, port, sessions, clock=clock).run_once()
    assert port.actions(job) == ["update", "release"]
    assert port.jobs[job].state == "RUNNING" and pending(sessions) == 0


def test_a_daemon_dead_between_update_and_release_releases_once(config, port, sessions, clock):
    job = port.add_job(HopsTag((1, 2), 10_000))
    with pytest.raises(Died):
        tick(config, port, sessions, clock, die_after=1).run_once()
    assert port.actions(job) == ["update"] and pending(sessions) == 1
    clock.advance(1)
    Tick(config, port, sessions, clock=clock).run_once()
    assert port.actions(job).count("release") == 1
    assert port.jobs[job].state == "RUNNING" and pending(sessions) == 0


def test_production_injects_no_faults(config, port, sessions, clock):
    tick = Tick(config, port, sessions, clock=clock)
    assert isinstance(tick.faults, NoFaults) and tick.enactor.faults is tick.faults


def test_launcher_takes_its_options_and_hands_hopsd_the_rest():
    hooks, rest = hooks_and_rest(
        ["--adopt-prefix", "t1-", "--crash-after-actions", "2", "--config", "c", "--shadow"]
    )
    assert rest == ["--config", "c", "--shadow"]
    assert hooks.faults == Crash(after_intents=False, after_actions=2)
    assert hooks.adopt_filter is not None


def test_launcher_without_options_is_plain_hopsd():
    hooks, rest = hooks_and_rest(["--once"])
    assert rest == ["--once"] and hooks.adopt_filter is None
    assert hooks.faults == Crash()
