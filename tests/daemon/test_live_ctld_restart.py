"""Live: slurmctld restarted, its state saved, in the middle of hopsd's enactment.

hopsd has written a decision's intents (starts: update, then release) when
slurmctld stops (``docker/cluster.sh stop-ctld``: SIGTERM, it saves its state)
-- before any of the Slurm calls, or between a start's update and its release.
hopsd's ticks fail while it is away, and back off; it is started again as
``docker/cluster.sh up`` starts it (the cluster's pids file updated). hopsd's
next ticks finish what the restart left, by resuming its intents: each
release taken once (``scontrol release`` with slurmctld away says "Unexpected
message received", which must read as Slurm away, not as a refusal that fails
the chain), no job started twice, none lost, no intent left pending.
Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import pytest
from centre_live import check_exactly_once, tick_while_away
from daemon_live import LIVE, LiveEnv, cluster, drive
from sqlalchemy import select

from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.ledger.models import IntentAction, IntentRow, IntentState

pytestmark = LIVE

#: How long slurmctld stays away (hopsd's ticks fail meanwhile).
AWAY_S = 10.0


class StopCtld:
    """hopsd's fault hooks (:class:`hopsd.daemon.faults.Faults`): stop slurmctld once,
    right after a decision's intents are committed or once a start is half done."""

    def __init__(self, env: LiveEnv, when: str) -> None:
        self.env, self.when = env, when
        self.releasing: list[str] = []  # jobs whose release was still to be taken then
        self.stopped = False

    def intents_committed(self) -> None:
        if self.when == "after-intents":
            self._stop()

    def action_taken(self, count: int) -> None:
        if self.when == "mid-start" and self._start_half_done():
            self._stop()

    def _start_half_done(self) -> bool:
        """A start's update is taken and its release not yet."""
        with self.env.sessions.begin() as s:
            rows = s.scalars(select(IntentRow)).all()
        updated = {
            r.job_id
            for r in rows
            if r.action == IntentAction.UPDATE and r.state == IntentState.DONE
        }
        return any(
            r.action == IntentAction.RELEASE and r.state == IntentState.PENDING
            and r.job_id in updated
            for r in rows
        )  # fmt: skip

    def _stop(self) -> None:
        if self.stopped:
            return
        with self.env.sessions.begin() as s:
            rows = s.scalars(select(IntentRow).where(IntentRow.state == IntentState.PENDING))
            self.releasing = sorted(r.job_id for r in rows if r.action == IntentAction.RELEASE)
        cluster("stop-ctld")
        self.stopped = True


@pytest.fixture
def env(tmp_path):
    # rounds longer than the outage: the chains are resumed after it, not dropped as stale
    live = LiveEnv.create(tmp_path, round_s=30.0)
    yield live
    cluster("start-ctld")  # running again whatever happened (a no-op when it runs)
    live.cleanup()


@pytest.mark.parametrize("when", ["after-intents", "mid-start"])
def test_a_controller_restart_mid_enactment_starts_nothing_twice_and_loses_nothing(env, when):
    for i in range(4):
        env.submit((1, 2), 2500, label=f"r{i}")
    fault = StopCtld(env, when)
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter(), faults=fault)
    service = Service(tick)
    assert drive(service.run_once, lambda: fault.stopped, 40), "no decision to enact"
    # the decision's releases were still to be taken when slurmctld went away
    assert fault.releasing, "no release left to take"
    try:
        tick_while_away(service.run_once, AWAY_S)
        assert service.failures >= 1
    finally:
        cluster("start-ctld")
    resumed: list[str] = []

    def step() -> None:
        result = service.run_once()
        if result is not None and result.resumed is not None:
            done = result.resumed.done
            resumed.extend(s.job_id for s in done if s.action == IntentAction.RELEASE)

    assert drive(step, env.all_terminal, 120)
    # what the restart left was finished by resuming it: each release taken, once
    assert sorted(resumed) == fault.releasing, (resumed, fault.releasing)
    check_exactly_once(env)
