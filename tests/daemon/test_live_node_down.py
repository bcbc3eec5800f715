"""Live: a node fails under a running hops job (its slurmd and the job's processes killed).

Plain ``sbatch`` jobs hold the a100 and k80 nodes. When the v100 node of a
running hops job dies, slurmctld marks it down after ``SlurmdTimeout`` and
requeues the job itself (``NODE_FAIL``). hopsd records that requeue as Slurm's,
not as a move of its own, places the job on the other v100 node without
waiting for the dead one, and the job finishes exactly once. The node's slurmd
is started again at the end (``ReturnToService=2`` brings it back).
Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import pytest
from centre_live import (
    finished_once,
    foreign,
    power_off,
    power_on,
    running_on,
    started_on,
    wait_running,
)
from daemon_live import LIVE, LiveEnv, drive
from sqlalchemy import select

from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_history
from hopsd.ledger.models import AllocationReason, JobState, RunRow

pytestmark = LIVE


@pytest.fixture
def env(tmp_path):
    live = LiveEnv.create(tmp_path, grace_s=3.0)
    yield live
    live.cleanup()


def test_a_job_on_a_failed_node_is_placed_again_and_finishes_once(env):
    foreign(env, "-p", "a100", "-N", "2", "--gres=gpu:4")
    foreign(env, "-p", "k80", "--gres=gpu:2")
    wait_running(env, env.blockers)
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    job = env.submit((2,), 16_000, label="survivor")  # ~40 s on v100n1, ~80 s on v100n2
    # running, and its script started (it reported its start)
    assert drive(
        tick.run_once, lambda: bool(running_on(env, job) and started_on(env, job)), 40, 0.5
    )
    (where,) = running_on(env, job)
    (other,) = [n for n in ("v100n1", "v100n2") if n != where]
    power_off(where, job)
    try:
        # SlurmdTimeout (30 s) before the node is down and the job requeued, then a tick
        assert drive(tick.run_once, lambda: set(running_on(env, job)) == {other}, 120, 1.0)
        assert drive(tick.run_once, env.all_terminal, 150, 1.0)
    finally:
        power_on(where)
    row = env.rows()[job]
    assert row.state == JobState.DONE and row.restarts == 1
    assert started_on(env, job) == [[where], [other]] and finished_once(env, job)
    with env.sessions.begin() as s:
        reasons = [a.reason for a in allocation_history(s, row.id)]
    # Slurm's requeue, not one of hops's moves or preemptions, and named as accounting does
    assert AllocationReason.MOVE not in reasons and AllocationReason.PREEMPT not in reasons
    with env.sessions.begin() as s:
        ended = [r.ended for r in s.scalars(select(RunRow).where(RunRow.job_id == row.id))]
    assert ended == ["node failure", "completed"], ended
