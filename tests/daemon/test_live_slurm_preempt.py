"""Live: Slurm's own QOS preemption requeues a running hops job.

The test cluster runs ``PreemptType=preempt/qos`` with ``PreemptMode=REQUEUE``;
the test makes a QOS whose ``Preempt`` list names ``normal`` (the QOS of every
other job), removed at the end. Plain ``sbatch`` jobs hold every GPU but
``v100n1``'s four, where a hops job runs; root's plain job of the preempting
QOS then takes the node, and Slurm requeues the hops job itself. hopsd records
that requeue as Slurm's (no move or preemption of its own, the run ended
"preempted by slurm"), and the job keeps its place by its LR: when the
preemptor ends it is the next to start, before a hops job that arrived later
with a lower LR, and it finishes exactly once.
Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set) with accounting; skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from centre_live import (
    accounting_kept,
    finished_once,
    foreign,
    preempting_qos,
    preemptor,
    running_on,
    started_on,
    wait_running,
)
from daemon_live import LIVE, LiveEnv, drive
from sqlalchemy import select

from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_history
from hopsd.ledger.models import AllocationReason, IntentAction, IntentRow, JobState, RunRow

pytestmark = LIVE

#: The preempting QOS the test makes (and removes).
QOS = "hopspreempt"


@pytest.fixture
def env(tmp_path):
    why = "sacctmgr changes need root" if os.geteuid() != 0 else accounting_kept()
    if why:
        pytest.skip(why)
    with preempting_qos(QOS):
        live = LiveEnv.create(tmp_path, grace_s=3.0)
        yield live
        live.cleanup()


@pytest.mark.parametrize("frees", ["its-node", "another-node"])
def test_a_job_slurm_preempts_is_recorded_as_slurms_and_keeps_its_place(env, frees):
    foreign(env, "-p", "a100", "-N", "2", "--gres=gpu:4")
    foreign(env, "-p", "k80", "--gres=gpu:2")
    v100n2 = foreign(env, "-p", "v100", "-w", "v100n2", "--gres=gpu:4")
    wait_running(env, env.blockers)  # v100n1's four GPUs are all hops has
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    job = env.submit((4,), 12_000, label="victim")  # ~15 s on v100n1, ~30 s on v100n2
    assert drive(
        tick.run_once, lambda: bool(running_on(env, job) and started_on(env, job)), 40, 0.5
    )
    assert running_on(env, job) == {"v100n1": 4}
    time.sleep(3)  # some work done, checkpointed
    # its own node frees when the preemptor ends; else v100n2 frees while it runs on
    high = preemptor(env, QOS, "v100n1", 4, seconds=15 if frees == "its-node" else 300)
    wait_running(env, [high])
    # a later arrival of the same demand and four times the work: its LR stays below
    later = env.submit((4,), 48_000, label="later")
    order: list[int] = []
    said: set[str] = set()

    def step() -> None:
        tick.run_once()
        said.add(env.rows()[job].state_reason)
        for j in (job, later):
            if running_on(env, j) and j not in order:
                order.append(j)

    assert drive(step, lambda: env.rows()[job].state == JobState.REQUEUED, 20, 0.5)
    if frees == "another-node":
        for _ in range(3):
            step()
        subprocess.run(["scancel", str(v100n2)], check=True, timeout=20)
    assert drive(step, lambda: bool(order), 60, 0.5), "nothing started after the preemption"
    assert order == [job], f"started first: {order}"
    assert drive(step, lambda: env.rows()[job].state == JobState.DONE, 60, 0.5)
    row = env.rows()[job]
    assert row.restarts == 1, row.restarts
    again = "v100n1" if frees == "its-node" else "v100n2"
    assert started_on(env, job) == [["v100n1"], [again]] and finished_once(env, job)
    # the tick that ends the job may release the later one, which Slurm starts
    # after that tick's look: seen now, it still started after the job
    if running_on(env, later) and later not in order:
        order.append(later)
    assert order in ([job], [job, later]), order
    with env.sessions.begin() as s:
        reasons = [a.reason for a in allocation_history(s, row.id)]
        requeues = s.scalars(
            select(IntentRow).where(
                IntentRow.job_id == row.id, IntentRow.action == IntentAction.REQUEUE_HOLD
            )
        ).all()
        ended = [r.ended for r in s.scalars(select(RunRow).where(RunRow.job_id == row.id))]
    # Slurm's requeue, not one of hops's moves or preemptions, and said to be Slurm's
    assert AllocationReason.MOVE not in reasons and AllocationReason.PREEMPT not in reasons
    assert not requeues, [(i.action, i.payload) for i in requeues]
    assert ended == ["preempted by slurm", "completed"], ended
    assert "preempted by slurm, requeued" in said, said
