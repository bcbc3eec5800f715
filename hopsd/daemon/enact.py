"""Enact: take the intents of a decision in Slurm.

Each intent is marked done or failed in its own small transaction right after
its Slurm call, so a daemon killed at any instant leaves at most the intents of
one chain pending. On restart, :func:`hopsd.daemon.resume.resume_steps` decides
from Slurm's observed state which of them still need doing: every action is
re-applied only if the job is still in the state it was meant to change, so
nothing is done twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hopsd.daemon.faults import Faults, NoFaults
from hopsd.daemon.hold_batch import hold_together
from hopsd.daemon.job_output import stopped_by_requeue
from hopsd.daemon.requeue_check import (
    RunEnd,
    RunVerdict,
    hit_an_ended_run,
    judge_requeued_run,
    last_requeued_run,
)
from hopsd.daemon.sensing import system_uid
from hopsd.ledger.records import AllocationReason, IntentAction, IntentRecord
from hopsd.ledger.unit import LedgerLike, Unit, as_ledger
from hopsd.slurm.errors import SlurmCommandError
from hopsd.slurm.port import Placement, RunRecord, SlurmJob, SlurmPort

log = logging.getLogger("hopsd.enact")


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
    def of(row: IntentRecord) -> Step:
        return Step(
            row.id, row.job_id or "", IntentAction(row.action), dict(row.payload), row.created_at
        )


@dataclass
class EnactReport:
    done: list[Step] = field(default_factory=list)
    failed: list[tuple[Step, str]] = field(default_factory=list)
    abandoned: list[tuple[Step, str]] = field(default_factory=list)
    deferred: list[Step] = field(default_factory=list)
    finished_early: list[str] = field(default_factory=list)
    # notices whose grace still runs (their chains wait, pending, for a later tick)
    noticed: list[Step] = field(default_factory=list)
    # rounds of waiting for requeued jobs; each costs two batched reads (queue, accounting)
    settle_polls: int = 0

    def count(self, action: IntentAction) -> int:
        return sum(1 for s in self.done if s.action == action)


@dataclass(frozen=True)
class SettleOptions:
    """How long a requeued job's release waits for Slurm to be ready for it.

    Slurm reallocates a requeued job as soon as it is eligible, even while its
    previous run is still completing on its nodes; a launch in the very second
    slurmd revoked the old run's credential fails ("Job credential revoked") and
    the job ends FAILED. So a chain that releases a requeued job waits until the
    job is plainly pending (no longer COMPLETING), its ended run is in accounting
    (to rule out a requeue that hit a finished job, :mod:`requeue_check`), and
    ``quiet_s`` more seconds have passed since its script ended. A job not ready
    within ``timeout_s`` keeps its chain pending; later ticks take it up again.
    """

    timeout_s: float = 20.0
    poll_s: float = 0.5
    quiet_s: float = 1.5
    #: A run accounting never shows a batch step for (it never launched) counts as
    #: stopped once the job has waited plainly pending this long.
    no_record_s: float = 30.0


def needs_settling(chain: Sequence[Step], index: int) -> bool:
    """Step ``index`` is the first Slurm change of a chain that releases a requeued job.

    Chains of requeued jobs (moves, and starts of preempted jobs) are exactly the
    ones with a ``make_eligible`` step (:func:`hopsd.daemon.decide.intent_chain`).
    """
    A = IntentAction
    if chain[index].action not in (A.UPDATE, A.MAKE_ELIGIBLE, A.RELEASE):
        return False
    return any(s.action == A.MAKE_ELIGIBLE for s in chain[index:])


def by_job(steps: Sequence[Step]) -> dict[str, list[Step]]:
    """Steps grouped into per-job chains, in the order the jobs first appear."""
    out: dict[str, list[Step]] = {}
    for step in steps:
        out.setdefault(step.job_id, []).append(step)
    return out


class Enactor:
    """Runs steps against the port and records each outcome at once."""

    def __init__(
        self,
        port: SlurmPort,
        ledger: LedgerLike,
        clock: Callable[[], float],
        running_now: Callable[[], set[int]] | None = None,
        *,
        settle: SettleOptions | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        guard: Callable[[], None] | None = None,
        uid_of: Callable[[str], int | None] = system_uid,
        before_release: Callable[[str, int, Mapping[str, Any]], None] | None = None,
        checkpointed_since: Callable[[int, float], bool] | None = None,
        faults: Faults | None = None,
    ) -> None:
        self.port = port
        # Tells the run about to start what it needs (hopsd.daemon.job_control).
        self.before_release = before_release
        # Whether a job reported a checkpoint since a moment (ends a notice's grace early).
        self.checkpointed_since = checkpointed_since
        self.running_now = running_now
        self.ledger = as_ledger(ledger)
        self.clock = clock
        self.settle = settle or SettleOptions()
        self.sleep = sleep
        self.monotonic = monotonic
        # Raises when this daemon may no longer act on Slurm (lease lost or unconfirmed).
        self.guard = guard
        self.uid_of = uid_of
        self.actions_taken = 0
        self.accounting_warned = False
        self._pending_since: dict[int, float] = {}
        self.faults = faults or NoFaults()

    def run(self, steps: Sequence[Step], skip: Mapping[int, str] | None = None) -> EnactReport:
        """Take ``steps`` in order; a refused step abandons the rest of that job's chain.

        ``skip`` maps intent ids to the reason they need no Slurm call (resume found
        them already done). Chains that release a requeued job first wait for Slurm
        to be ready (:class:`SettleOptions`). ``SlurmUnavailableError`` propagates
        and leaves the remaining steps pending for the next tick.
        """
        report = EnactReport()
        skip = skip or {}
        broken: dict[str, str] = {}
        for job_id in self._not_running(steps, skip):
            broken[job_id] = "job no longer running when it was to be requeued"
        waiting: dict[str, list[Step]] = {}
        chains = by_job(steps)
        held = hold_together(self, chains, skip, broken, report)
        for job_id, chain in chains.items():
            if job_id in held:
                continue
            for index, step in enumerate(chain):
                if job_id not in broken and needs_settling(chain, index):
                    waiting[job_id] = chain[index:]
                    break
                if step.action == IntentAction.NOTICE and job_id not in broken:
                    if step.intent_id in skip or self._notice(step, report):
                        self._take(step, skip, broken, report)
                        continue
                    break  # the grace runs on: the rest of the chain stays pending
                self._take(step, skip, broken, report)
        if waiting:
            self._settle(waiting, skip, broken, report)
        return report

    def _take(
        self, step: Step, skip: Mapping[int, str], broken: dict[str, str], report: EnactReport
    ) -> None:
        """One step: abandoned after a broken link, recorded as already done, or called."""
        if step.job_id in broken:
            self._abandon(step, f"earlier step failed: {broken[step.job_id]}", report)
            return
        if step.intent_id in skip:
            self._finish(step, None)
            log.info(
                "event=enact job=%s action=%s result=already-done reason=%r",
                step.job_id,
                step.action.value,
                skip[step.intent_id],
            )
            report.done.append(step)
            return
        if self.guard is not None:
            self.guard()
        if step.action == IntentAction.RELEASE:
            self._tell_the_run(step)
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
            return
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
        self.faults.action_taken(self.actions_taken)

    def _notice(self, step: Step, report: EnactReport) -> bool:
        """Signal every process of the job once, then True when its requeue may go ahead.

        Every step, the batch step's whole tree included (``batch_only=False``):
        ranks started by ``srun`` or ``torchrun`` hear the notice themselves;
        the batch shell survives it by the ``trap`` that ``hops submit`` adds.

        That is when the job's probe reported a checkpoint since the signal, or
        the grace recorded in the intent is over, or the signal could not be
        sent (nothing to wait for). The time the signal went out is written to
        the intent first thing, so a restarted daemon waits out the same grace.
        """
        sent_at = step.payload.get("sent_at")
        if sent_at is None:
            if self.guard is not None:
                self.guard()
            signal_name = str(step.payload.get("signal", "USR1"))
            try:
                self.port.signal(step.slurm_id, signal_name, batch_only=False)
            except SlurmCommandError as exc:
                log.warning(
                    "event=notice-failed job=%s slurm_job=%s error=%r note='requeued at once'",
                    step.job_id,
                    step.slurm_id,
                    str(exc),
                )
                return True
            sent_at = self.clock()
            with self.ledger.unit() as unit:
                unit.note_notice_sent(step.intent_id, sent_at)
            log.info(
                "event=notice job=%s slurm_job=%s signal=%s grace_s=%s kind=%s",
                step.job_id,
                step.slurm_id,
                signal_name,
                step.payload.get("grace_s"),
                step.payload.get("kind"),
            )
            self.actions_taken += 1
        waited = self.clock() - float(sent_at)
        if self.checkpointed_since is not None and self.checkpointed_since(
            step.slurm_id, float(sent_at)
        ):
            why = "checkpointed"
        elif waited >= float(step.payload.get("grace_s", 0.0)):
            why = "grace over"
        else:
            report.noticed.append(step)
            return False
        log.info(
            "event=notice-over job=%s slurm_job=%s reason=%r waited_s=%.1f",
            step.job_id,
            step.slurm_id,
            why,
            waited,
        )
        return True

    def _tell_the_run(self, step: Step) -> None:
        """Write the run's mode file before its release; a failure never stops the release."""
        if self.before_release is None:
            return
        try:
            self.before_release(step.job_id, step.slurm_id, step.payload)
        except Exception as exc:  # the run starts without it (the probe falls back to None)
            log.warning("event=mode-file-failed job=%s error=%r", step.job_id, str(exc))

    # -- releasing requeued jobs only when Slurm is ready ------------------------------

    def _settle(
        self,
        waiting: dict[str, list[Step]],
        skip: Mapping[int, str],
        broken: dict[str, str],
        report: EnactReport,
    ) -> None:
        """Poll (one queue read and one accounting read per round) until each chain may go on."""
        deadline = self.monotonic() + self.settle.timeout_s
        while waiting:
            report.settle_polls += 1
            jobs = {j.job_id: j for j in self.port.list_jobs()}
            runs = self._runs([c[0].slurm_id for c in waiting.values()])
            now = self.clock()
            for job_id, chain in list(waiting.items()):
                verdict = self._readiness(chain, jobs.get(chain[0].slurm_id), runs, now)
                if verdict is None:
                    continue
                del waiting[job_id]
                self._go_on(chain, verdict, skip, broken, report)
            if not waiting or self.monotonic() >= deadline:
                break
            self.sleep(self.settle.poll_s)
        for job_id, chain in waiting.items():
            report.deferred.append(chain[0])
            log.info(
                "event=enact job=%s slurm_job=%s result=deferred "
                "reason='previous run not yet off its nodes; retried next tick'",
                job_id,
                chain[0].slurm_id,
            )

    def _runs(self, slurm_ids: Sequence[int]) -> list[RunRecord] | None:
        """Accounting's runs of these jobs, or None where the cluster keeps none."""
        try:
            return self.port.runs(slurm_ids)
        except SlurmCommandError as exc:
            if not self.accounting_warned:
                self.accounting_warned = True
                log.warning(
                    "event=no-run-accounting error=%r note='a requeue that hits a job just "
                    "as it finishes cannot be told from accounting; relying on the fresh "
                    "queue read and progress reports'",
                    str(exc),
                )
            return None

    def _readiness(
        self,
        chain: Sequence[Step],
        job: SlurmJob | None,
        runs: Sequence[RunRecord] | None,
        now: float,
    ) -> Readiness | None:
        """What to do with a waiting chain now, or None to keep waiting."""
        slurm_id = chain[0].slurm_id
        if job is None or job.finished:
            return Readiness("gone", "job left the queue while it was requeued")
        if job.state == "RUNNING":
            return Readiness("gone", "job runs again: released outside hops")
        if job.state != "PENDING":
            self._pending_since.pop(slurm_id, None)
            return None  # still COMPLETING on its old nodes
        tick = self.monotonic()
        waited = tick - self._pending_since.setdefault(slurm_id, tick)
        if self._after_relaunch(chain[0].job_id):
            return self._ready_after_quiet(slurm_id, waited, now, None, "")
        if runs is None:
            said = self._ended_on_its_own(chain[0].job_id, job, job.submit_time or now)
            if said:
                verdict = RunVerdict(RunEnd.FINISHED, f"{said} (no accounting)", "COMPLETED")
                return Readiness("finished", verdict.detail, verdict)
            return self._ready_after_quiet(slurm_id, waited, now, None, "")
        verdict = judge_requeued_run(last_requeued_run(runs, slurm_id))
        if verdict.end == RunEnd.UNSETTLED:
            if waited >= self.settle.no_record_s:
                return Readiness("ready", f"{verdict.detail}; taken as stopped")
            return None
        if verdict.end == RunEnd.FINISHED:
            return Readiness("finished", verdict.detail, verdict)
        if verdict.end == RunEnd.AMBIGUOUS:
            said = self._ended_on_its_own(chain[0].job_id, job, verdict.requeued_at or now)
            if said:
                return Readiness("finished", f"{verdict.detail}; {said}", verdict)
        return self._ready_after_quiet(slurm_id, waited, now, verdict.ended_at, verdict.detail)

    def _ready_after_quiet(
        self, slurm_id: int, waited: float, now: float, ended_at: float | None, detail: str
    ) -> Readiness | None:
        """Ready once the old run has been off its nodes for ``quiet_s`` (None: not yet).

        Slurm's end times are whole seconds, so the run may have ended up to a
        second after the recorded one.
        """
        quiet = self.settle.quiet_s
        if waited < quiet or (ended_at is not None and now - (ended_at + 1.0) < quiet):
            return None
        self._pending_since.pop(slurm_id, None)
        return Readiness("ready", detail)

    def _go_on(
        self,
        chain: Sequence[Step],
        readiness: Readiness,
        skip: Mapping[int, str],
        broken: dict[str, str],
        report: EnactReport,
    ) -> None:
        if readiness.kind == "gone":
            for step in chain:
                self._abandon(step, readiness.detail, report)
        elif readiness.kind == "finished" and readiness.verdict is not None:
            self._cancel_finished(chain, readiness.verdict, readiness.detail, report)
        else:
            for step in chain:
                self._take(step, skip, broken, report)

    def _ended_on_its_own(self, job_id: str, job: SlurmJob, requeued_at: float) -> str:
        """Evidence that the run had ended before the requeue reached it ("" for none).

        Asked only where accounting cannot tell (same second, or no accounting):
        Slurm's kept allocation record, the job's own progress report, and the
        absence of slurmstepd's requeue line in the job's output.
        """
        if hit_an_ended_run(job):
            return "Slurm kept the ended run's allocation record"
        if self._progress_complete(job_id):
            return "all samples reported"
        stopped = stopped_by_requeue(job, requeued_at, self.uid_of)
        if stopped is False:
            return "no requeue line from slurmstepd in the job's output"
        if stopped is None:
            log.info(
                "event=requeue-unverifiable job=%s note='same-second end; no output to read; "
                "taken as stopped by the requeue'",
                job_id,
            )
        return ""

    def _after_relaunch(self, job_id: str) -> bool:
        """The job's last requeue retried a failed launch: its run never ran, nothing finished."""
        with self.ledger.unit() as unit:
            return unit.last_requeue_was_relaunch(job_id)

    def _progress_complete(self, job_id: str) -> bool:
        with self.ledger.unit() as unit:
            return unit.run_reported_complete(job_id)

    def _cancel_finished(
        self, chain: Sequence[Step], verdict: RunVerdict, evidence: str, report: EnactReport
    ) -> None:
        """The requeue hit a run that had finished: record it finished, cancel the requeue.

        The ledger learns first (the job's end and a ``cancel`` intent, in one
        transaction), then Slurm; a crash in between leaves a pending cancel that
        resume takes again (the job is held, so it cannot have run meanwhile).
        """
        first = chain[0]
        now = self.clock()
        reason = f"finished before hops requeued it ({evidence}); not run again"
        payload = {"slurm_id": first.slurm_id, "kind": "finished", "reason": reason}
        with self.ledger.unit() as unit:
            ended_at = verdict.ended_at if verdict.ended_at is not None else now
            if unit.record_finished_run(first.job_id, verdict.final_state, ended_at, reason):
                # history rows at the time hops learned it, after the move it had recorded
                self._undo_planned_move(unit, chain, now)
                unit.record_allocation(None, first.job_id, AllocationReason.END, None, now)
            for step in chain:
                unit.mark_abandoned(step.intent_id, reason, now)
            row = unit.record_intent(first.job_id, IntentAction.CANCEL, payload, None, now)
            cancel = Step.of(row)
        for step in chain:
            report.abandoned.append((step, reason))
        log.warning(
            "event=requeue-hit-finished-job job=%s slurm_job=%s state=%s evidence=%r "
            "action='recorded as finished; the held requeue is cancelled, never released'",
            first.job_id,
            first.slurm_id,
            verdict.final_state,
            evidence,
        )
        report.finished_early.append(first.job_id)
        self._take(cancel, {}, {}, report)

    @staticmethod
    def _undo_planned_move(unit: Unit, chain: Sequence[Step], at: float) -> None:
        """The history said the job moved; it finished where it was: say so (a ``keep``)."""
        if chain[0].payload.get("kind") != "move":
            return
        where = unit.placement_before_last_move(chain[0].job_id)
        if where is not None:
            unit.record_allocation(None, chain[0].job_id, AllocationReason.KEEP, where, at)

    def _not_running(self, steps: Sequence[Step], skip: Mapping[int, str]) -> set[str]:
        """Jobs whose requeue would hit a job that already ended (one fresh batched read).

        ``scontrol requeuehold`` also requeues a *finished* batch job, which would
        run it a second time; the plan was made from an observation up to a tick
        old, so the jobs to requeue are checked again right before. This narrows
        the race to one command's latency; :meth:`_settle` detects what slips through.
        """
        requeues = [
            s
            for s in steps
            if s.action == IntentAction.REQUEUE_HOLD
            and s.intent_id not in skip
            and not s.payload.get("relaunch")
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
            cpus = int(step.payload.get("cpus_per_gpu", 0) or 0)
            partition = str(step.payload["partition"])
            self.port.update_pending(job, Placement.of(partition, nodes, cpus))
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
        elif step.action == A.NOTICE:
            pass  # signalled (once) by _notice; taking it only marks it done

    def _finish(self, step: Step, error: str | None) -> None:
        with self.ledger.unit() as unit:
            if error is None:
                unit.mark_done(step.intent_id, self.clock())
            else:
                unit.mark_failed(step.intent_id, error, self.clock())

    def _abandon(self, step: Step, reason: str, report: EnactReport) -> None:
        with self.ledger.unit() as unit:
            unit.mark_abandoned(step.intent_id, reason, self.clock())
        report.abandoned.append((step, reason))
        log.info(
            "event=enact job=%s action=%s result=abandoned reason=%r",
            step.job_id,
            step.action.value,
            reason,
        )


@dataclass(frozen=True)
class Readiness:
    """A waiting chain's fate: ``ready`` to go on, ``finished`` (cancel), or ``gone``."""

    kind: str
    detail: str
    verdict: RunVerdict | None = None
