"""Live: a maintenance reservation (``scontrol create reservation flags=maint``) coming up.

Plain ``sbatch`` jobs hold every GPU but the v100 ones, so a reservation on
``v100n1`` takes most of what hops has. A job the estimator expects to outlast
the reservation's start is not placed there, even when its Slurm time limit
would let Slurm launch it; one that ends before it is; a job
already running there that would outlast it gets its notice and moves to
``v100n2`` before the reservation begins, and finishes once.
Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import time

import pytest
from centre_live import (
    finished_once,
    foreign,
    reserved,
    running_on,
    slurm_states,
    started_on,
    wait_running,
)
from daemon_live import LIVE, LiveEnv, drive

from hopsd.daemon.tick import Tick
from hopsd.ledger.models import JobState

pytestmark = LIVE


@pytest.fixture
def env(tmp_path):
    # short rounds: a move is due 2 rounds + the notice's grace + 60 s (71 s) before it
    live = LiveEnv.create(tmp_path, grace_s=3.0, round_s=4.0)
    yield live
    live.cleanup()


def hold_all_but_v100(env: LiveEnv, v100n2_gpus: int) -> None:
    foreign(env, "-p", "a100", "-N", "2", "--gres=gpu:4")
    foreign(env, "-p", "k80", "--gres=gpu:2")
    if v100n2_gpus:
        foreign(env, "-p", "v100", "-w", "v100n2", f"--gres=gpu:{v100n2_gpus}")
    wait_running(env, env.blockers)


def test_only_a_job_that_ends_before_the_reservation_is_placed_on_its_node(env):
    hold_all_but_v100(env, v100n2_gpus=4)  # v100n1 is all hops has
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    with reserved(f"{env.prefix}maint", "v100n1", start_in_s=180):
        time.sleep(0.5)
        # time limits short of the start: Slurm itself would launch both on v100n1
        long_job = env.submit((2,), 200_000, label="long", minutes=2)  # ~500 s on v100n1
        short_job = env.submit((2,), 2000, label="short", minutes=2)  # ~5 s
        seen: list[tuple[str, bool, dict[str, int]] | None] = []

        def step() -> None:
            tick.run_once()
            seen.append(slurm_states(env).get(long_job))

        assert drive(step, lambda: env.rows()[short_job].state == JobState.DONE, 60, 0.5)
        for _ in range(4):
            step()
        # both would fit on v100n1's four GPUs; the long one would still run at the start
        assert seen and all(s is not None and s[:2] == ("PENDING", True) for s in seen), seen
    assert started_on(env, short_job) == [["v100n1"]] and finished_once(env, short_job)


def test_a_job_that_would_outlast_the_reservation_moves_with_notice_before_it(env):
    hold_all_but_v100(env, v100n2_gpus=2)  # two GPUs free on v100n2, four on v100n1
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    job = env.submit((2,), 36_000, label="outlast")  # ~90 s on v100n1, ~180 s on v100n2
    assert drive(tick.run_once, lambda: bool(running_on(env, job)), 40, 0.5)
    (where,) = running_on(env, job)
    (other,) = [n for n in ("v100n1", "v100n2") if n != where]
    with reserved(f"{env.prefix}maint", where, start_in_s=75):
        begins = time.time() + 75
        assert drive(tick.run_once, lambda: set(running_on(env, job)) == {other}, 75, 0.5)
        assert time.time() < begins  # off the node and running again before it begins
        assert drive(tick.run_once, env.all_terminal, 240, 0.5)
    row = env.rows()[job]
    assert row.state == JobState.DONE and row.restarts == 1
    assert started_on(env, job) == [[where], [other]] and finished_once(env, job)
