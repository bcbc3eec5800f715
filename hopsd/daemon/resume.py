"""Resume: after a crash, decide which pending intents still need doing.

Each intent is marked done or failed right after its Slurm call, so a daemon
killed at any instant leaves at most one chain per job pending. On restart
:func:`resume_steps` replays each chain against what Slurm now shows: a step is
taken again only if the job is still in the state the step was meant to
change, so nothing is done twice; a stale plan that has not yet released its
job is dropped, and the job waits held for the next decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hopsd.daemon.enact import Step
from hopsd.daemon.views import ObservedJob
from hopsd.ledger.records import IntentAction
from hopsd.slurm.port import HELD_REASONS


@dataclass
class _Sim:
    """The job's state as resuming imagines it after each earlier step of its chain."""

    exists: bool
    pending: bool
    held: bool
    busy: bool
    restarts: int


@dataclass(frozen=True)
class ResumePlan:
    to_run: list[Step]
    already_done: dict[int, str]
    to_abandon: list[tuple[Step, str]]


def resume_steps(
    pending: Sequence[Step], observed: Mapping[int, ObservedJob], now: float, max_age_s: float
) -> ResumePlan:
    """Which pending steps to take again, which already happened, which to drop.

    A chain older than ``max_age_s`` (the round length) that has not yet
    released its job is dropped instead: its plan is stale, and the job simply
    waits held until the next decision places it afresh.
    """
    to_run: list[Step] = []
    done: dict[int, str] = {}
    drop: list[tuple[Step, str]] = []
    by_job: dict[str, list[Step]] = {}
    for step in sorted(pending, key=lambda s: s.intent_id):
        by_job.setdefault(step.job_id, []).append(step)
    for steps in by_job.values():
        seen = observed.get(steps[0].slurm_id)
        if seen is not None and seen.final and all(s.payload.get("relaunch") for s in steps):
            to_run.extend(steps)  # requeueing a job whose launch failed: Slurm allows it
            continue
        if seen is None or seen.final:
            drop.extend((s, "job left the queue") for s in steps)
            continue
        # a requeued job still leaving its nodes shows COMPLETING with its hold reason
        leaving = seen.state == "COMPLETING" and seen.reason in HELD_REASONS
        is_pending, is_held = seen.pending or leaving, seen.held or leaving
        sim = _Sim(True, is_pending, is_held, seen.busy and not leaving, seen.restarts)
        # a notice's grace is part of its chain's life: not stale while it runs
        notices = [s for s in steps if s.action == IntentAction.NOTICE]
        grace = max((float(s.payload.get("grace_s", 0.0)) for s in notices), default=0.0)
        stale = now - min(s.created_at for s in steps) > max_age_s + grace
        for step in steps:
            verdict = _judge(step, sim, stale)
            if verdict == "run":
                to_run.append(step)
            elif verdict.startswith("drop:"):
                drop.append((step, verdict[5:]))
            else:
                done[step.intent_id] = verdict
    to_run_all = sorted(
        to_run + [s for s in pending if s.intent_id in done], key=lambda s: s.intent_id
    )
    return ResumePlan(to_run_all, done, drop)


def _judge(step: Step, sim: _Sim, stale: bool) -> str:
    """ "run", a reason it is already done, or "drop:<reason>"; updates ``sim``."""
    A = IntentAction
    if step.action == A.NOTICE:
        if sim.busy and sim.restarts == int(step.payload.get("restarts", 0)):
            if stale and "sent_at" not in step.payload:
                return "drop:stale plan; the job keeps running"
            return "run"  # sends the signal if it never went out, else waits out the grace
        return "job no longer running"
    if step.action == A.REQUEUE_HOLD:
        if sim.busy and sim.restarts == int(step.payload.get("restarts", 0)):
            if stale:
                return "drop:stale plan; the job keeps running"
            sim.busy, sim.pending, sim.held = False, True, True
            sim.restarts += 1
            return "run"
        return "already requeued"
    if step.action in (A.UPDATE, A.MAKE_ELIGIBLE):
        if sim.pending and sim.held:
            return "drop:stale plan; the job waits held" if stale else "run"
        return "job already released or running"
    if step.action == A.RELEASE:
        if sim.pending and sim.held:
            if stale:
                return "drop:stale plan; the job waits held"
            sim.held = False
            return "run"
        return "job already released or running"
    if step.action == A.CANCEL:
        return "run"  # only hops's cancel of a held requeue whose run had finished
    if step.action == A.HOLD:
        if sim.pending:
            sim.held = True
            return "run"  # a hold by hops, over the owner's own or none: taken again harmlessly
        return "drop:job no longer pending"
    return "drop:not resumable"
