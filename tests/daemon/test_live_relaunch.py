"""Live: a run Slurm ends FAILED at once after hops released it is relaunched by the step.

A batch script that exits at its first line ends FAILED within a second of its
start, as a launch that failed does (the run never really ran). The scheduling
step's act stage relaunches it (:func:`hopsd.core.act.relaunch`), the tick
enacts the relaunch (requeued held, its intent written first) and a later plan
places it again, at most ``MAX_RELAUNCHES`` times; then the job ends FAILED.
"""

from __future__ import annotations

from daemon_live import LIVE, LiveEnv, drive
from sqlalchemy import select

from hopsd.core.act import MAX_RELAUNCHES
from hopsd.daemon.tick import Tick
from hopsd.ledger.models import IntentAction, IntentRow, IntentState, JobState
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = LIVE


def test_a_run_that_fails_at_once_is_relaunched_then_ends_failed(env: LiveEnv) -> None:
    script = env.root / "fails.sh"
    script.write_text("#!/bin/sh\nexit 1\n")
    script.chmod(0o755)
    args = ["-J", f"{env.prefix}fails", "-o", "/dev/null", "-t", "2"]
    job = env.port.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 1e6)))
    env.submitted.append(job)
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())

    def ended() -> bool:
        row = env.rows().get(job)
        return row is not None and row.state == JobState.FAILED

    assert drive(tick.run_once, ended, 180, 1.0), env.rows().get(job)
    with env.sessions.begin() as s:
        requeues = s.scalars(
            select(IntentRow).where(
                IntentRow.action == IntentAction.REQUEUE_HOLD, IntentRow.state == IntentState.DONE
            )
        ).all()
    assert len(requeues) == MAX_RELAUNCHES
    assert all(r.payload.get("relaunch") and r.payload["kind"] == "relaunch" for r in requeues)
