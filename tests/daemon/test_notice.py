"""The checkpoint notice: signal first, requeue once the job checkpointed or its grace is over.

On the fake cluster a job runs on the slow k80s and gains 8x on the a100s just
freed, so the next round moves it. With a grace the move starts with a signal;
the requeue waits for the job's checkpoint report or the end of the grace,
which is kept in the intent log: a restarted daemon neither signals again nor
requeues early. Meanwhile the job's GPUs are not given to anyone else.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from daemon_fakeport import FakeClock, FakePort, a100_pays_8x
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.tick import Tick
from hopsd.ledger.intents import pending_intents
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import IntentAction
from hopsd.slurm.tag import HopsTag

GRACE = 30.0


def daemon(config: HopsConfig, port: FakePort, sessions, clock: FakeClock) -> Tick:  # type: ignore[no-untyped-def]
    """A (fresh) daemon's tick; every user's files are the test user's own."""
    sensing = Sensing(Path(config.spool_dir), uid_of=lambda user: os.getuid())
    return Tick(config, port, sessions, clock=clock, sensing=sensing)


def about_to_move(
    config: HopsConfig,
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
    probed: bool = True,
) -> tuple[HopsConfig, Tick, int]:
    config = dataclasses.replace(config, checkpoint_grace_s=GRACE)
    foreign = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
    job = port.add_job(HopsTag((4,), 1e7))
    tick = daemon(config, port, sessions, clock)
    tick.run_once()
    assert set(port.jobs[job].placement) <= {"slow1", "slow2"}
    a100_pays_8x(sessions, clock, job)
    if probed:  # the job's probe reported its run's start: it can take the notice
        node = next(iter(port.jobs[job].placement))
        report(config, job, node, [{"seq": 1, "at": clock(), "kind": "start", "startup_s": 4.25}])
        tick.run_once()
    port.finish(foreign)
    clock.advance(11)  # a new round: running jobs are re-planned
    return config, tick, job


def notice_of(sessions: sessionmaker[Session], job: int) -> dict[str, object]:
    with sessions.begin() as s:
        (row,) = [r for r in pending_intents(s, str(job)) if r.action == IntentAction.NOTICE]
        return dict(row.payload)


def report(config: HopsConfig, job: int, node: str, records: list[dict[str, object]]) -> None:
    """Append probe records of the job's first run to its report file."""
    common = {"v": 1, "job": str(job), "run": 0, "node": node}
    with open(Path(config.spool_dir) / "alice" / f"{job}.jsonl", "a") as f:
        f.writelines(json.dumps({**common, **r}) + "\n" for r in records)


def report_checkpoint(config: HopsConfig, job: int, node: str, at: float) -> None:
    """What the probe writes on notice: the checkpoint, with the samples it holds."""
    record = {"seq": 9, "at": at, "kind": "checkpoint", "seconds": 1.5, "samples_done": 6400.0}
    report(config, job, node, [record])


def test_a_move_signals_first_and_requeues_once_the_job_checkpointed(
    config, port, sessions, clock
) -> None:  # type: ignore[no-untyped-def]
    config, tick, job = about_to_move(config, port, sessions, clock)
    node = next(iter(port.jobs[job].placement))
    result = tick.run_once()
    assert [a.kind for a in result.actions] == ["move"]
    assert port.actions(job)[-1] == "signal" and port.jobs[job].state == "RUNNING"
    # every step of the job hears it, the ranks srun or torchrun started included
    assert port.signal_scopes == [(job, "full")]
    sent = notice_of(sessions, job)
    assert sent["grace_s"] == GRACE and sent["signal"] == "USR1" and sent["sent_at"] == clock()
    others = [port.add_job(HopsTag((4,), 1e7)) for _ in range(3)]
    for _ in range(3):  # ticks within the grace: the noticed job's GPUs stay its own
        clock.advance(2)
        tick.run_once()
        assert port.jobs[job].state == "RUNNING" and "requeue_hold" not in port.actions(job)
        assert all(node not in (port.jobs[o].target or {}) for o in others)  # nor planned there
    report_checkpoint(config, job, node, clock() + 0.5)
    clock.advance(1)
    tick.run_once()
    assert port.actions(job).count("signal") == 1
    assert "requeue_hold" in port.actions(job)
    assert set(port.jobs[job].placement) <= {"fast1", "fast2"}
    with sessions.begin() as s:  # the restart cost the probe measured is kept
        row = get_job(s, str(job))
        assert row is not None and (row.checkpoint_s, row.startup_s) == (1.5, 4.25)


def _noticed(config, port, sessions, clock):  # type: ignore[no-untyped-def]
    """The job about to move, after the tick that sends its notice; and when it was sent."""
    config, tick, job = about_to_move(config, port, sessions, clock)
    tick.run_once()
    sent_at = float(notice_of(sessions, job)["sent_at"])  # type: ignore[arg-type]
    return config, tick, job, sent_at


def test_a_job_that_ignores_the_notice_is_requeued_after_the_grace(
    config, port, sessions, clock
) -> None:  # type: ignore[no-untyped-def]
    config, tick, job, sent_at = _noticed(config, port, sessions, clock)
    while clock() + 1 < sent_at + GRACE:
        clock.advance(1)
        tick.run_once()
        assert "requeue_hold" not in port.actions(job), clock() - sent_at
    clock.advance(1)  # the first tick past the grace requeues it
    tick.run_once()
    assert "requeue_hold" in port.actions(job)
    assert set(port.jobs[job].placement) <= {"fast1", "fast2"}


def test_a_daemon_killed_during_the_grace_resumes_it_without_a_second_signal(
    config, port, sessions, clock
) -> None:  # type: ignore[no-untyped-def]
    config, tick, job, sent_at = _noticed(config, port, sessions, clock)
    del tick  # killed: only the ledger remains
    clock.advance(GRACE / 2)
    restarted = daemon(config, port, sessions, clock)
    restarted.run_once()
    assert port.actions(job).count("signal") == 1 and "requeue_hold" not in port.actions(job)
    clock.advance(GRACE / 2 + 1)
    restarted.run_once()
    assert clock() - sent_at > GRACE and "requeue_hold" in port.actions(job)
    assert port.actions(job).count("signal") == 1


def test_without_a_grace_moves_requeue_at_once(config, port, sessions, clock) -> None:  # type: ignore[no-untyped-def]
    config, tick, job = about_to_move(config, port, sessions, clock)
    tick = daemon(dataclasses.replace(config, checkpoint_grace_s=0.0), port, sessions, clock)
    tick.run_once()
    assert "signal" not in port.actions(job) and "requeue_hold" in port.actions(job)


def test_a_job_whose_probe_never_reported_is_requeued_without_a_signal(
    config, port, sessions, clock
) -> None:  # type: ignore[no-untyped-def]
    """No probe, no checkpoint on notice -- and SIGUSR1 would kill a plain batch script."""
    config, tick, job = about_to_move(config, port, sessions, clock, probed=False)
    result = tick.run_once()
    assert [a.kind for a in result.actions] == ["move"]
    assert "signal" not in port.actions(job) and "requeue_hold" in port.actions(job)
    assert set(port.jobs[job].placement) <= {"fast1", "fast2"}


def test_a_reload_never_switches_to_a_spool_others_can_write(  # type: ignore[no-untyped-def]
    config, port, sessions, clock, tmp_path
):
    tick = daemon(config, port, sessions, clock)
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o1777)
    tick.reconfigure(dataclasses.replace(config, spool_dir=str(loose)))
    assert tick.reconciler.sensing.spools.shared == Path(config.spool_dir)  # kept
    fresh = tmp_path / "fresh"
    tick.reconfigure(dataclasses.replace(config, spool_dir=str(fresh)))
    assert tick.reconciler.sensing.spools.shared == fresh and fresh.stat().st_mode & 0o777 == 0o755
