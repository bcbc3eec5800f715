"""A job that reported more samples done than it claimed is not believed from then on."""

from __future__ import annotations

import logging

from hopsd.config import HopsConfig
from hopsd.core.sizeclaim import SizeRule, progress_doubt
from hopsd.daemon.sensing import Sensing
from hopsd.ledger.records import JobRecord, JobUpdate
from hopsd.ledger.unit import Unit

log = logging.getLogger("hopsd.reconcile")


def doubt_reported_progress(
    unit: Unit, row: JobRecord, sensing: Sensing, config: HopsConfig
) -> None:
    """Mark the job's size doubted when its report goes past its claim.

    The ledger keeps samples done at the claim (a report's number is the
    user's), so the core's rule (:func:`hopsd.core.sizeclaim.progress_doubt`)
    is asked here, where the reported number is seen; the step then plans
    the job from its time limit, as any doubted job.
    """
    reported = sensing.take_beyond(row.id)
    if reported is None or row.size_doubt:
        return
    rule = SizeRule(config.size_check_factor, config.size_check_slack_s)
    doubt = progress_doubt(reported, row.total_samples, rule)
    if doubt:
        unit.update_job(JobUpdate(row.id, size_doubt=doubt[:500]))
        log.warning(
            "event=size-doubted job=%s claimed=%g reported=%.0f reason=%r",
            row.id,
            row.total_samples,
            reported,
            doubt,
        )
