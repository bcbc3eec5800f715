"""Enact: take the intents of a decision in Slurm, and resume those a crash left pending.

Each intent is marked done or failed in its own small transaction right after
its Slurm call, so a daemon killed at any instant leaves at most the intents of
one chain pending. On restart, :func:`resume_steps` decides from Slurm's
observed state which of them still need doing: every action is re-applied only
if the job is still in the state it was meant to change, so nothing is done twice.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from hopsd.daemon.views import ObservedJob
from hopsd.ledger.intents import mark_abandoned, mark_done, mark_failed
from hopsd.ledger.models import IntentAction, IntentRow
from hopsd.slurm.errors import SlurmCommandError
from hopsd.slurm.port import Placement, SlurmPort

log = logging.getLogger("hopsd.enact")

# Test-only crash points (documented in the test suite): SIGKILL ourselves right
# after the intents of a decision are committed, or after N Slurm actions.
CRASH_AFTER_INTENT = "HOPS_TEST_CRASH_AFTER_INTENT"
CRASH_AFTER_ACTIONS = "HOPS_TEST_CRASH_AFTER_ACTIONS"


@dataclass(frozen=True)
class Step:
    """A committed intent, detached from its session."""

    intent_id: int
    job_id: str
    action: IntentAction
    payload: Mapping[str, Any]
    created_at: float = 0.0

    @property
    def slurm_id(self) -> int:
        return int(self.payload["slurm_id"])

    @staticmethod
    def of(row: IntentRow) -> Step:
        return Step(
            row.id, row.job_id or "", IntentAction(row.action), dict(row.payload), row.created_at
        )


@dataclass
class EnactReport:
    done: list[Step] = field(default_factory=list)
    failed: list[tuple[Step, str]] = field(default_factory=list)
    abandoned: list[tuple[Step, str]] = field(default_factory=list)

    def count(self, action: IntentAction) -> int:
        return sum(1 for s in self.done if s.action == action)


def crash_point(name: str) -> None:
    """Die like ``kill -9`` when the test-only variable asks for it."""
    if os.environ.get(name) == "1":
        os.kill(os.getpid(), signal.SIGKILL)


class Enactor:
    """Runs steps against the port and records each outcome at once."""

    def __init__(
        self,
        port: SlurmPort,
        sessions: sessionmaker[Session],
        clock: Callable[[], float],
        running_now: Callable[[], set[int]] | None = None,
    ) -> None:
        self.port = port
        self.running_now = running_now
        self.sessions = sessions
        self.clock = clock
        self.actions_taken = 0
        limit = os.environ.get(CRASH_AFTER_ACTIONS, "")
        self._crash_after = int(limit) if limit.isdigit() and int(limit) > 0 else None

    def run(self, steps: Sequence[Step], skip: Mapping[int, str] | None = None) -> EnactReport:
        """Take ``steps`` in order; a refused step abandons the rest of that job's chain.

        ``skip`` maps intent ids to the reason they need no Slurm call (resume found
        them already done). ``SlurmUnavailableError`` propagates and leaves the
        remaining steps pending for the next tick.
        """
        report = EnactReport()
        broken: dict[str, str] = {}
        for job_id in self._not_running(steps, skip or {}):
            broken[job_id] = "job no longer running when it was to be requeued"
        for step in steps:
            if step.job_id in broken:
                self._abandon(step, f"earlier step failed: {broken[step.job_id]}", report)
                continue
            if skip and step.intent_id in skip:
                self._finish(step, None)
                log.info(
                    "event=enact job=%s action=%s result=already-done reason=%r",
                    step.job_id,
                    step.action.value,
                    skip[step.intent_id],
                )
                report.done.append(step)
                continue
            try:
                self._call(step)
            except SlurmCommandError as exc:
                broken[step.job_id] = str(exc)
                self._finish(step, str(exc))
                report.failed.append((step, str(exc)))
                log.warning(
                    "event=enact job=%s action=%s kind=%s result=failed error=%r",
                    step.job_id,
                    step.action.value,
                    step.payload.get("kind"),
                    str(exc),
                )
                continue
            self._finish(step, None)
            report.done.append(step)
            log.info(
                "event=enact job=%s slurm_job=%s action=%s kind=%s reason=%r result=ok",
                step.job_id,
                step.slurm_id,
                step.action.value,
                step.payload.get("kind"),
                step.payload.get("reason", ""),
            )
            self.actions_taken += 1
            if self._crash_after is not None and self.actions_taken >= self._crash_after:
                os.kill(os.getpid(), signal.SIGKILL)
        return report

    def _not_running(self, steps: Sequence[Step], skip: Mapping[int, str]) -> set[str]:
        """Jobs whose requeue would hit a job that already ended (one fresh batched read).

        ``scontrol requeuehold`` also requeues a *finished* batch job, which would
        run it a second time; the plan was made from an observation up to a tick
        old, so the jobs to requeue are checked again right before.
        """
        requeues = [
            s for s in steps if s.action == IntentAction.REQUEUE_HOLD and s.intent_id not in skip
        ]
        if not requeues or self.running_now is None:
            return set()
        running = self.running_now()
        return {s.job_id for s in requeues if s.slurm_id not in running}

    def abandon(self, steps: Sequence[tuple[Step, str]]) -> EnactReport:
        report = EnactReport()
        for step, reason in steps:
            self._abandon(step, reason, report)
        return report

    def _call(self, step: Step) -> None:
        A = IntentAction
        job = step.slurm_id
        if step.action == A.UPDATE:
            nodes = {str(n): int(g) for n, g in step.payload["nodes"]}
            self.port.update_pending(job, Placement.of(str(step.payload["partition"]), nodes))
        elif step.action == A.RELEASE:
            self.port.release(job)
        elif step.action == A.REQUEUE_HOLD:
            self.port.requeue_hold(job)
        elif step.action == A.MAKE_ELIGIBLE:
            self.port.make_eligible(job)
        elif step.action == A.HOLD:
            self.port.hold(job)
        elif step.action == A.CANCEL:
            self.port.cancel(job)

    def _finish(self, step: Step, error: str | None) -> None:
        with self.sessions.begin() as session:
            if error is None:
                mark_done(session, step.intent_id, self.clock())
            else:
                mark_failed(session, step.intent_id, error, self.clock())

    def _abandon(self, step: Step, reason: str, report: EnactReport) -> None:
        with self.sessions.begin() as session:
            mark_abandoned(session, step.intent_id, reason, self.clock())
        report.abandoned.append((step, reason))
        log.info(
            "event=enact job=%s action=%s result=abandoned reason=%r",
            step.job_id,
            step.action.value,
            reason,
        )


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
        if seen is None or seen.final:
            drop.extend((s, "job left the queue") for s in steps)
            continue
        sim = _Sim(True, seen.pending, seen.held, seen.busy, seen.restarts)
        stale = now - min(s.created_at for s in steps) > max_age_s
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
    return "drop:not resumable"
