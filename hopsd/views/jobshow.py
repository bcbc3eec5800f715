"""One job's whole story as ``hops show --json`` and hopsd's ``/job/ID`` page give it.

Tag, demands, throughput estimates per type with where each came from, LR and
FTF rho, queue position, START and ETA, placements and restarts over time,
each Slurm run and why it ended, and refusals. One builder for the CLI and the
page, so the two can never disagree.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from hopsd.views.joblist import daemon_state, queue_order, show_record

if TYPE_CHECKING:
    from hopsd.ledger.records import ThroughputRecord
    from hopsd.ledger.unit import Unit

LAYER_SOURCE = {
    "entity_agg": "measured on this server",
    "entity_dist": "measured across servers",
    "type_agg": "measured on this type",
    "type_dist": "measured on this type across servers",
}


def estimates_of(records: list[ThroughputRecord]) -> dict[str, dict[str, Any]]:
    """Per place (GPU type or server): per-GPU samples/s by size and the layer it came from."""
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: (r.place, r.layer, r.size)):
        entry = out.setdefault(
            r.place, {"source": LAYER_SOURCE.get(str(r.layer), str(r.layer)), "per_gpu": {}}
        )
        entry["per_gpu"][str(r.size)] = round(r.per_gpu, 3)
    return out


def show_payload(unit: Unit, slurm_job_id: int) -> dict[str, Any] | None:
    """The ``--json`` document of ``hops show`` (golden file show.json), None if unknown."""
    found = unit.jobs_by_slurm_ids([slurm_job_id]).get(slurm_job_id)
    if found is None:
        return None
    now = time.time()
    daemon = daemon_state(unit.lease_info(), unit.latest_round(), now)
    position = {j.id: k + 1 for k, j in enumerate(queue_order(unit.queue_entries()))}
    predicted = unit.latest_predictions([found.id]).get(found.id)
    placements = unit.placements([found.id])[found.id]
    runs = unit.job_runs([found.id])[found.id]
    estimates = estimates_of(unit.job_throughputs(found.id))
    return show_record(
        found, now, daemon, placements, estimates, predicted, position.get(found.id), runs
    )
