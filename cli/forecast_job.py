"""``hops submit --test-only``: when the job would start and finish, without submitting it.

The job as it would be tagged is added to the live state (the ledger's jobs,
what Slurm runs now, what hopsd has learned) and hopsd's step is run forward
(:mod:`hopsd.sim.forecast`): once with the job as submitted, which is what
hops expects, and once for each GPU type and count it could get. A job hops
has never seen runs at the type table's rate, as hopsd assumes; it joins the
queue after hopsd's queue refresh and, where hopsd profiles new jobs, after
the profiling phase hopsd measured of the latest jobs. Slurm's ``PrivateData`` applies: jobs the
caller may not see are not in the forecast.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hopsd.config import HopsConfig
from hopsd.ledger.unit import Unit
from hopsd.sim.forecast import ForecastInput, Hypothetical, Predicted, forecast
from hopsd.slurm.port import SlurmPort
from hopsd.slurm.tag import HopsTag

ASKED = "test-only"


def allowed_types(tag: HopsTag, types: Sequence[str]) -> list[str]:
    """The managed types the job may run on (its --types, minus its --exclude-types)."""
    chosen = [t for t in types if not tag.types or t in tag.types]
    return [t for t in chosen if t not in tag.exclude_types]


def _input(config: HopsConfig, unit: Unit, port: SlurmPort, now: float) -> ForecastInput:
    from hopsd.core.step import RoundClock
    from hopsd.daemon.assemble import assemble
    from hopsd.daemon.observe import observe

    obs = observe(port, lambda: now)
    rows = [r for r in unit.active_jobs() if r.slurm_job_id is not None]
    ids = [r.id for r in rows]
    built = assemble(
        rows, obs, config, unit.latest_targets(ids), unit.throughput_snapshot(ids), now
    )
    settings = config.settings()
    last = unit.latest_round()
    clock = RoundClock(settings.round_length_s, None if last is None else last.started_at)
    return ForecastInput(
        built.snapshot,
        clock,
        config.policy,
        settings,
        launch_s=unit.launch_s() or 0.0,
        adoption_s=config.queue_refresh_s,
        profile_s=(unit.profiling_phase_s() or 0.0) if config.profiling else 0.0,
    )


def _row(p: Predicted, now: float, gpu_type: str | None, gpus: int | None) -> dict[str, Any]:
    return {
        "gpu_type": gpu_type if gpu_type is not None else p.gpu_type,
        "gpus": gpus if gpus is not None else p.gpus,
        "start_at": p.start_at,
        "end_at": p.end_at,
        "start_in_s": None if p.start_at is None else round(max(p.start_at - now, 0.0), 1),
        "finish_in_s": None if p.end_at is None else round(max(p.end_at - now, 0.0), 1),
    }


def test_only_payload(
    config: HopsConfig, unit: Unit, port: SlurmPort, tag: HopsTag, user: str
) -> dict[str, Any]:
    """The ``--json`` document: ``expected`` (the job as submitted) and ``options``."""
    now = time.time()
    given = _input(config, unit, port, now)
    cluster = given.snapshot.cluster
    types = allowed_types(tag, sorted(cluster.gpu_types))
    table = {t: given.settings.reference_throughput * cluster.gpu_types[t].speed for t in types}
    largest = {t: sum(n.gpus for n in cluster.nodes if n.gpu_type == t) for t in types}

    def ask(demands: tuple[int, ...], rates: dict[str, float]) -> Predicted:
        job = Hypothetical(
            ASKED, demands, tag.total_samples, rates, tag.batch_size, tag.params, user
        )
        return forecast(given, [job])[ASKED]

    fits = tuple(d for d in tag.demands if any(d <= largest[t] for t in types))
    expected = _row(ask(fits, table), now, None, None) if fits else None
    options = [
        _row(ask((d,), {t: table[t]}), now, t, d)
        for t in types
        for d in tag.demands
        if d <= largest[t]
    ]
    return {
        "made_at": now,
        "queued_jobs": len(given.snapshot.queued),
        "running_jobs": len(given.snapshot.running),
        "expected": expected,
        "options": options,
    }
