"""Live: a node drained under running hops jobs (``scontrol update state=drain``).

Plain ``sbatch`` jobs hold the a100 and k80 nodes and some v100 GPUs, so the
only room hops has is on the v100 nodes. With ``[slurm] on_drain = "finish"``
the job on the drained node runs to its end there and nothing new is placed
on the node until it is resumed; with ``"move"`` the job gets its notice and
moves to the other v100 node at the next round. Either way it finishes once.
Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import dataclasses

import pytest
from centre_live import (
    drained,
    finished_once,
    foreign,
    running_on,
    slurm_states,
    started_on,
    wait_running,
)
from daemon_live import LIVE, LiveEnv, drive

from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_history
from hopsd.ledger.jobs import TERMINAL_STATES
from hopsd.ledger.models import AllocationReason, JobState

pytestmark = LIVE
V100 = ("v100n1", "v100n2")


@pytest.fixture
def env(tmp_path):
    live = LiveEnv.create(tmp_path, grace_s=5.0)
    yield live
    live.cleanup()


def hold_all_but_v100(env: LiveEnv, v100n2_gpus: int) -> None:
    foreign(env, "-p", "a100", "-N", "2", "--gres=gpu:4")
    foreign(env, "-p", "k80", "--gres=gpu:2")
    foreign(env, "-p", "v100", "-w", "v100n2", f"--gres=gpu:{v100n2_gpus}")
    wait_running(env, env.blockers)


def test_a_drained_node_lets_its_job_finish_and_takes_no_new_one_until_resumed(env):
    hold_all_but_v100(env, v100n2_gpus=4)  # v100n1 is all hops has
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    first = env.submit((2,), 8000, label="first")
    assert drive(tick.run_once, lambda: bool(running_on(env, first)), 40, 0.5)
    assert running_on(env, first) == {"v100n1": 2}
    seen: list[tuple[str, bool, dict[str, int]] | None] = []
    with drained("v100n1"):
        second = env.submit((2,), 2000, label="second")

        def step() -> None:
            tick.run_once()
            seen.append(slurm_states(env).get(second))

        assert drive(step, lambda: env.rows()[first].state in TERMINAL_STATES, 90, 0.5)
        for _ in range(4):  # drained and empty now: still no place for the second job
            step()
        # on the drained node's two free GPUs Slurm would never start it: it stays held
        assert seen and all(s is not None and s[:2] == ("PENDING", True) for s in seen), seen
    assert drive(tick.run_once, env.all_terminal, 90, 0.5)
    rows = env.rows()
    assert rows[first].state == JobState.DONE and rows[first].restarts == 0
    assert started_on(env, first) == [["v100n1"]] and finished_once(env, first)
    assert rows[second].state == JobState.DONE, (rows[second].state, rows[second].state_reason)
    assert started_on(env, second) == [["v100n1"]] and finished_once(env, second)


def test_on_drain_move_moves_the_job_with_notice_and_it_finishes_once(env):
    hold_all_but_v100(env, v100n2_gpus=2)  # two GPUs free on v100n2, four on v100n1
    config = dataclasses.replace(env.config, on_drain="move")
    tick = Tick(config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    job = env.submit((2,), 8000, label="mover")
    assert drive(tick.run_once, lambda: bool(running_on(env, job)), 40, 0.5)
    (where,) = running_on(env, job)
    (other,) = [n for n in V100 if n != where]
    with drained(where):
        assert drive(tick.run_once, lambda: set(running_on(env, job)) == {other}, 60, 0.5)
    assert drive(tick.run_once, env.all_terminal, 90, 0.5)
    row = env.rows()[job]
    assert row.state == JobState.DONE and row.restarts >= 1
    assert started_on(env, job)[0] == [where] and started_on(env, job)[-1] == [other]
    assert finished_once(env, job)
    with env.sessions.begin() as s:
        reasons = [a.reason for a in allocation_history(s, row.id)]
    assert AllocationReason.MOVE in reasons, reasons
