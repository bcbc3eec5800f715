"""Tag rules in the daemon (in-memory Slurm): GPU-type constraints and --no-preempt."""

from __future__ import annotations

import dataclasses
import logging

from daemon_fakeport import a100_pays_8x

from hopsd.daemon.tick import Tick
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import JobState
from hopsd.slurm.tag import HopsTag


def _on_slow_with_fast_free(config, port, sessions, clock, tag: HopsTag):  # type: ignore[no-untyped-def]
    """The job starts on k80 (a100 taken by others), then the a100s free up: a move pays."""
    foreign = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
    job = port.add_job(tag)
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    clock.advance(1)
    tick.run_once()
    a100_pays_8x(sessions, clock, job)
    port.finish(foreign)
    clock.advance(11)
    return tick, job


def test_the_same_job_is_moved_to_the_free_a100s_without_rules(config, port, sessions, clock):  # type: ignore[no-untyped-def]
    tick, _ = _on_slow_with_fast_free(config, port, sessions, clock, HopsTag((4,), 1e5))
    assert [a.kind for a in tick.run_once().actions] == ["move"]


def test_a_job_excluding_a100_stays_off_it_round_after_round(config, port, sessions, clock):  # type: ignore[no-untyped-def]
    tag = HopsTag((4,), 1e5, exclude_types=("a100",))
    tick, job = _on_slow_with_fast_free(config, port, sessions, clock, tag)
    for _ in range(4):
        assert tick.run_once().actions == []
        assert set(port.jobs[job].placement) <= {"slow1", "slow2"}
        clock.advance(11)


def test_a_no_preempt_job_is_never_moved_nor_profiled(config, port, sessions, clock):  # type: ignore[no-untyped-def]
    tick, job = _on_slow_with_fast_free(
        config, port, sessions, clock, HopsTag((4,), 1e5, no_preempt=True)
    )
    for _ in range(4):
        assert tick.run_once().actions == []
        clock.advance(11)
    assert "requeue_hold" not in port.actions(job)
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and JobState(row.state) == JobState.RUNNING


def test_a_tag_naming_an_unmanaged_type_is_refused_at_adoption(config, port, sessions, clock):  # type: ignore[no-untyped-def]
    job = port.add_job(HopsTag((1,), 1e5, types=("h100",)))
    result = Tick(config, port, sessions, clock=clock).run_once()
    assert result.reconcile is not None
    (rejected,) = result.reconcile.rejected
    assert rejected[0] == job and "unknown GPU type h100" in rejected[1]
    assert port.jobs[job].state == "PENDING"


def test_profiling_skips_no_preempt_jobs(config, port, sessions, clock, caplog):  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO, logger="hopsd")
    tick = Tick(dataclasses.replace(config, profiling=True), port, sessions, clock=clock)
    plain = port.add_job(HopsTag((1,), 1e5))
    pinned = port.add_job(HopsTag((1,), 1e5, no_preempt=True))
    tick.run_once()
    profiled = {
        r.getMessage().split("job=")[1].split()[0]
        for r in caplog.records
        if "event=profile-" in r.getMessage()
    }
    assert profiled == {str(plain)}  # the plain job entered profiling, the pinned one never
    assert port.jobs[pinned].state == "RUNNING"


def test_a_constraint_dropped_from_the_comment_after_adoption_is_reported_and_ignored(  # type: ignore[no-untyped-def]
    config, port, sessions, clock
):
    """The owner edits the comment (``scontrol update comment=``) to drop ``--exclude-types
    a100`` once the job is adopted: the adopted tag still rules, and the owner is told."""
    tag = HopsTag((4,), 1e5, exclude_types=("a100",))
    tick, job = _on_slow_with_fast_free(config, port, sessions, clock, tag)
    port.jobs[job].comment = HopsTag((4,), 1e5).encode()
    for _ in range(4):
        assert tick.run_once().actions == []
        assert set(port.jobs[job].placement) <= {"slow1", "slow2"}
        clock.advance(11)
    with sessions.begin() as s:
        row = get_job(s, str(job))
        assert row is not None and row.adopted_tag == tag.encode()
        assert "changed after hopsd adopted it" in row.input_problem
