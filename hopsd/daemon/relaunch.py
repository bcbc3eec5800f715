"""Relaunch: a job whose launch failed at once is requeued, not ended.

Whether it is relaunched is the act stage's rule (:func:`hopsd.core.act.relaunch`,
asked by the scheduling step for each ``Snapshot.launch_failures``). Reconcile
defers the end of such a run (:meth:`hopsd.daemon.reconcile.Reconciler._follow`);
this module reads the facts the step judges (:func:`launch_failures`) and, after
the step, records each relaunch with its intents
(:func:`hopsd.daemon.decide.chains`, written before the enactor takes them) or
has the end recorded that reconcile deferred (:func:`relaunch_or_end`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from hopsd.core import act
from hopsd.core.snapshot import LaunchFailure
from hopsd.daemon.decide import Action, chains
from hopsd.daemon.views import Observation, ObservedJob
from hopsd.ledger import runs
from hopsd.ledger.records import IntentRecord, JobRecord, JobState
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")


def launch_failures(
    unit: Unit, rows: Sequence[JobRecord], obs: Observation
) -> tuple[LaunchFailure, ...]:
    """Runs Slurm ended as a failed launch ends, of jobs the ledger still has active (their
    end deferred by reconcile): the facts the act stage judges, with the relaunches hops
    took already and whether the run was hops's release. A job in its profiling runs
    is the profiling queue's and never relaunched."""
    observed = obs.job_map()
    out: list[LaunchFailure] = []
    for row in rows:
        seen = observed.get(int(row.slurm_job_id or 0))
        if seen is None or not seen.final or JobState(row.state) == JobState.PROFILING:
            continue
        if not act.launch_failed(seen.state, seen.start_time, seen.end_time):
            continue  # no ledger read for the common end
        tries, ours = unit.relaunches(row.id), unit.released_by_hops(row.id)
        out.append(LaunchFailure(row.id, seen.state, seen.start_time, seen.end_time, tries, ours))
    return tuple(out)


def relaunch_or_end(
    unit: Unit,
    failures: Sequence[LaunchFailure],
    acts: Sequence[act.Act],
    rows: Sequence[JobRecord],
    obs: Observation,
    end: Callable[[JobRecord, ObservedJob], None],
    now: float,
) -> tuple[list[Action], list[IntentRecord]]:
    """Record the step's relaunches of ``failures`` (intents first, then the failed run and
    the requeue) and ``end`` the others; the relaunch actions and intents to enact."""
    relaunched = {a.job_id for a in acts if a.kind == act.RELAUNCH}
    by_id = {r.id: r for r in rows}
    observed = obs.job_map()
    actions: list[Action] = []
    reasons: dict[str, str] = {}
    for failure in failures:
        row = by_id.get(failure.job_id)
        seen = observed.get(int(row.slurm_job_id or 0)) if row is not None else None
        if row is None or seen is None:
            continue
        if failure.job_id not in relaunched:
            end(row, seen)
            continue
        said = seen.reason if seen.reason not in ("", "None") else seen.state
        reasons[row.id] = f"launch failed ({said}); requeued by hops, try {failure.tries + 1}"
        actions.append(Action(row.id, seen.slurm_id, act.RELAUNCH, None, "", seen.restarts, False))
        _record_failed_run(unit, row, seen, reasons[row.id], now)
        log.warning(
            "event=launch-failed job=%s slurm_state=%s action=relaunch try=%d",
            row.id,
            seen.state,
            failure.tries + 1,
        )
    intents = unit.record_intents(chains(actions, reasons), None, now) if actions else []
    return actions, intents


def _record_failed_run(
    unit: Unit, row: JobRecord, seen: ObservedJob, reason: str, now: float
) -> None:
    """The run that never really ran, closed as a failed launch; the job requeued."""
    if JobState(row.state) != JobState.RUNNING:
        unit.transition(row.id, JobState.RUNNING, seen.start_time or now, "ran between ticks")
    unit.open_run(row.id, seen.restarts, runs.RUN, None, seen.start_time or now)
    unit.close_run(row.id, seen.end_time or now, runs.LAUNCH_FAILED, seen.exit_code)
    unit.transition(row.id, JobState.REQUEUED, now, reason)
    unit.set_placement(row.id, None)
