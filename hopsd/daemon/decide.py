"""Decide: take the core's scheduling step and turn its plan into Slurm actions.

The step (:func:`hopsd.core.step.schedule_step`) owns the round clock, fragment
planning, sparing and validation, exactly as in the simulator. The plan is a
diff; each entry becomes an ordered chain of Slurm actions, written as intents
before any of them is taken.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hopsd.config import HopsConfig
from hopsd.core.act import HOLD as HOLD
from hopsd.core.act import RELAUNCH as RELAUNCH
from hopsd.core.act import Act
from hopsd.core.model import Configuration, Plan
from hopsd.core.policies import Policy
from hopsd.core.profiling import ProfilingDecision
from hopsd.core.scoring import Scores
from hopsd.core.settings import Settings
from hopsd.core.sizeclaim import SizeVerdict
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, StepOptions, schedule_step
from hopsd.ledger.records import IntentAction, IntentRequest

START, MOVE, PREEMPT = "start", "move", "preempt"
# Profiling (hopsd.core.profiling decides, hopsd.daemon.profiling enacts): start a
# short run on one GPU of a type, and HOLD a released run that did not start in time
# (also hops's own hold on a job its owner could release). HOLD and RELAUNCH (requeue
# held a job whose launch failed at once) are the act stage's (hopsd.core.act).
PROFILE = "profile"


@dataclass(frozen=True)
class Decision:
    """One scheduling step as hopsd took it: what the core decided and how long it took."""

    kind: str
    plan: Plan
    decision_s: float
    idle_gpus_waiting: int
    reasons: Mapping[str, str] = field(default_factory=dict)
    spared: tuple[str, ...] = ()
    profiling: ProfilingDecision = field(default_factory=ProfilingDecision)
    planned: Snapshot | None = None
    doubted: tuple[SizeVerdict, ...] = ()
    scores: Scores | None = None
    actions: tuple[Act, ...] = ()


@dataclass(frozen=True)
class JobHandle:
    """What enacting needs to know about a job besides the plan."""

    slurm_id: int
    restarts: int
    was_requeued: bool
    cpus_per_gpu: int = 0
    #: released already, but Slurm cannot launch it there (a start holds it again first)
    released: bool = False


@dataclass(frozen=True)
class Action:
    """One plan entry to enact: start a queued job, move or preempt a running one."""

    job_id: str
    slurm_id: int
    kind: str
    config: Configuration | None
    partition: str
    restarts: int
    was_requeued: bool
    cpus_per_gpu: int = 0
    released: bool = False

    def describe(self) -> str:
        if self.config is None:
            return self.kind
        parts = "+".join(f"{n}:{g}" for n, g in self.config.parts)
        return f"{self.kind} {self.config.gpu_type} {parts}"


def decide(
    snapshot: Snapshot,
    clock: RoundClock,
    policy: Policy,
    settings: Settings,
    options: StepOptions,
) -> tuple[Decision, RoundClock]:
    """Take the core's scheduling step (the same one the simulator takes) and time it."""
    started = time.perf_counter()
    step = schedule_step(snapshot, clock, policy, settings, options)
    elapsed = time.perf_counter() - started
    decision = Decision(
        step.kind,
        step.plan,
        elapsed,
        step.idle_gpus_waiting,
        step.reasons,
        step.spared,
        step.profiling,
        step.planned,
        step.doubted,
        step.scores,
        step.actions,
    )
    return decision, step.clock


def actions_from_plan(
    plan: Plan, handles: Mapping[str, JobHandle], partition_of: Mapping[str, str]
) -> list[Action]:
    """Start/move/preempt actions for jobs hops manages (unknown ids are ignored)."""
    out: list[Action] = []

    def add(job_id: str, kind: str, config: Configuration | None) -> None:
        handle = handles.get(job_id)
        if handle is None:
            return
        partition = partition_of[config.parts[0][0]] if config is not None else ""
        out.append(
            Action(
                job_id,
                handle.slurm_id,
                kind,
                config,
                partition,
                handle.restarts,
                handle.was_requeued,
                handle.cpus_per_gpu,
                handle.released,
            )
        )

    for a in plan.start:
        add(a.job_id, START, a.config)
    for a in plan.move:
        add(a.job_id, MOVE, a.config)
    for job_id in plan.preempt:
        add(job_id, PREEMPT, None)
    return out


@dataclass(frozen=True)
class Notice:
    """The checkpoint notice before a move or preemption: which signal, how long to wait."""

    signal: str = "USR1"
    grace_s: float = 120.0


def notice_of(config: HopsConfig) -> Notice | None:
    """The checkpoint notice before moves and preemptions (none with a zero grace)."""
    if config.checkpoint_grace_s <= 0:
        return None
    return Notice(config.notice_signal.removeprefix("SIG"), config.checkpoint_grace_s)


def intent_chain(action: Action, reason: str, notice: Notice | None = None) -> list[IntentRequest]:
    """The ordered Slurm actions one action needs: the one builder of hopsd's intents
    (plan entries, profiling runs, holds, relaunches and requeues of unplanned starts).

    With ``notice`` a move or preemption starts with a ``notice`` intent: the
    job is signalled, and the requeue waits until it reported a checkpoint or
    the grace (recorded in the intent, so a restarted daemon keeps it) is over.
    """
    base: dict[str, Any] = {"slurm_id": action.slurm_id, "kind": action.kind, "reason": reason}
    A = IntentAction
    chain: list[IntentRequest] = []
    if action.kind in (MOVE, PREEMPT) and notice is not None:
        told = {**base, "signal": notice.signal, "grace_s": notice.grace_s}
        chain.append(IntentRequest(action.job_id, A.NOTICE, {**told, "restarts": action.restarts}))
    if action.kind in (MOVE, PREEMPT):
        chain.append(
            IntentRequest(action.job_id, A.REQUEUE_HOLD, {**base, "restarts": action.restarts})
        )
    if action.kind == HOLD or (action.kind == START and action.released):
        # a released job placed anew is held first: its update must not race a launch
        chain.append(IntentRequest(action.job_id, A.HOLD, base))
    if action.kind == RELAUNCH:
        again = {**base, "relaunch": True, "restarts": action.restarts}
        chain.append(IntentRequest(action.job_id, A.REQUEUE_HOLD, again))
    if action.kind in (START, MOVE, PROFILE) and action.config is not None:
        placement = {
            **base,
            "partition": action.partition,
            "gpu_type": action.config.gpu_type,
            "nodes": [[n, g] for n, g in action.config.parts],
        }
        if action.cpus_per_gpu > 0:
            placement["cpus_per_gpu"] = action.cpus_per_gpu
        chain.append(IntentRequest(action.job_id, A.UPDATE, placement))
        if action.kind == MOVE or action.was_requeued or action.restarts > 0:
            chain.append(IntentRequest(action.job_id, A.MAKE_ELIGIBLE, base))
        # what the job's next run is told (hopsd.daemon.job_control): its GPUs, and the
        # restart count it will have (a move's requeue adds one)
        run = action.restarts + (1 if action.kind == MOVE else 0)
        release = {**base, "gpus": action.config.total_gpus, "run": run}
        chain.append(IntentRequest(action.job_id, A.RELEASE, release))
    return chain


def chains(
    actions: Sequence[Action],
    reasons: Mapping[str, str],
    notice: Notice | None = None,
    listening: Collection[str] | None = None,
) -> list[IntentRequest]:
    """Every action's intents; the notice goes only to jobs in ``listening`` when given.

    A job whose probe never reported cannot checkpoint on notice, and a batch
    script that does not handle the signal dies of it (SIGUSR1 terminates a
    shell by default): such a job is requeued at once, as without a notice.
    """
    out: list[IntentRequest] = []
    for action in actions:
        told = notice if listening is None or action.job_id in listening else None
        out.extend(intent_chain(action, reasons.get(action.job_id, action.kind), told))
    return out
