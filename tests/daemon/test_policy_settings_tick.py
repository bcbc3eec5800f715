"""hopsd plans with the configured policy's own settings, and a reload that changes them
rebuilds the policy."""

from __future__ import annotations

import dataclasses

from daemon_fakeport import FakeClock, FakePort, NothingMeasured
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.core.policies.fifo import FifoSettings
from hopsd.daemon.tick import Tick
from hopsd.slurm.tag import HopsTag


def _fifo(config: HopsConfig, backfill: bool) -> HopsConfig:
    return dataclasses.replace(config, policy="fifo", policies={"fifo": {"backfill": backfill}})


def test_fifo_without_backfill_holds_a_small_job_behind_a_blocked_head_until_a_reload(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    # another user's job leaves one k80 node free: the 8-GPU head cannot start, a 1-GPU job can
    port.add_job(None, held=False, running_on={"slow1": 4, "fast1": 4, "fast2": 4})
    head = port.add_job(HopsTag((8,), 1e7))
    small = port.add_job(HopsTag((1,), 1e5))
    tick = Tick(_fifo(config, backfill=False), port, sessions, clock=clock)
    assert tick.own_settings == FifoSettings(backfill=False)
    tick.run_once()
    assert port.jobs[head].held and port.jobs[small].held
    strict = tick.policy

    clock.advance(2)
    tick.reconfigure(_fifo(config, backfill=False))
    assert tick.policy is strict  # the same settings keep the policy (and its bookkeeping)
    tick.reconfigure(_fifo(config, backfill=True))
    assert tick.policy is not strict
    tick.run_once()
    assert port.jobs[small].placement == {"slow2": 1}
    assert port.jobs[head].held


def test_hopsd_forecasts_with_the_same_settings_it_plans_with(config: HopsConfig) -> None:
    from hopsd.core.model import Cluster
    from hopsd.core.snapshot import Snapshot
    from hopsd.core.step import RoundClock
    from hopsd.daemon.forecasting import measured_input

    snapshot = Snapshot(0.0, Cluster.build([], []), ())
    given = measured_input(NothingMeasured(), _fifo(config, False), snapshot, RoundClock(10.0))  # type: ignore[arg-type]
    assert (given.policy, given.policy_settings) == ("fifo", FifoSettings(backfill=False))
