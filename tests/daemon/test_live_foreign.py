"""Live: another Unix user's plain ``sbatch --gres=gpu:N`` jobs take and free GPUs between ticks.

hops jobs queue for the two v100 nodes (the a100 and k80 ones are held too)
while another user's short jobs come and go on them. At every tick the GPUs
hops planned on each node, added to the GPUs of other jobs that ran on it
throughout the tick, never exceed the node; no command hopsd runs names one of
those jobs, each of them runs exactly once (none requeued), and every hops job
finishes once. Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import time

from centre_live import (
    finished_once,
    foreign,
    held_throughout,
    names_any,
    others_running,
    overbooked,
    wait_running,
)
from daemon_live import LIVE
from live_users import ensure_user

from hopsd.daemon.tick import Tick
from hopsd.ledger.models import JobState

pytestmark = LIVE
OTHER_USER = "hopsother"
#: (node, GPUs) of the other user's jobs, one every few ticks, each running 6 s
CHURN = (("v100n1", 2), ("v100n2", 3), ("v100n1", 1), ("v100n2", 2), ("v100n1", 3))


def test_other_users_jobs_are_never_planned_over_nor_touched(env):
    user = ensure_user(OTHER_USER)
    foreign(env, "-p", "a100", "-N", "2", "--gres=gpu:4")
    foreign(env, "-p", "k80", "--gres=gpu:2")
    wait_running(env, env.blockers)
    sizes = {n.name: n.gpus_total for n in env.port.list_nodes()}
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    hops = [env.submit((1, 2), 3000, label=f"h{i}") for i in range(6)]
    theirs: list[int] = []
    checked = contested = 0
    # a wall-clock budget, not a count of ticks: a faster tick must not cut the other
    # user's last jobs short of their end
    deadline = time.monotonic() + 300
    i = -1
    while time.monotonic() < deadline:
        i += 1
        if i % 3 == 0 and len(theirs) < 3 * len(CHURN):
            node, gpus = CHURN[len(theirs) % len(CHURN)]
            theirs.append(
                foreign(env, "-p", "v100", "-w", node, f"--gres=gpu:{gpus}", seconds=6, user=user)
            )
        before = others_running(env, hops)
        result = tick.run_once()
        after = others_running(env, hops)
        if result.decision is not None:
            over = overbooked(sizes, result.decision, held_throughout(before, after))
            assert not over, (
                f"tick {i}: hops planned on GPUs other jobs hold: {over}",
                result.decision.reasons,
                before,
                after,
                [
                    (j.job_id, j.state, j.held, j.reason, j.placement)
                    for j in env.port.list_jobs()
                    if j.job_id in hops
                ],
            )
            checked += 1
            steady = held_throughout(before, after)
            contested += any(steady.get(n, 0) for n in ("v100n1", "v100n2"))
        if env.all_terminal() and not any(
            j.job_id in theirs and not j.finished for j in env.port.list_jobs()
        ):
            break
        time.sleep(0.5)
    # decisions taken while the other user's jobs held v100 GPUs throughout the tick
    assert contested >= 2, (checked, contested)
    assert env.all_terminal()
    rows = env.rows()
    for job in hops:
        assert rows[job].state == JobState.DONE and finished_once(env, job), rows[job].state
    assert not [argv for argv in env.runner.calls if names_any(argv, theirs)]
    runs = env.port.runs(theirs)
    assert sorted(r.job_id for r in runs) == sorted(theirs)  # one run each: none requeued
    assert all(r.state == "COMPLETED" for r in runs), [
        (r.job_id, r.state) for r in runs if r.state != "COMPLETED"
    ]
