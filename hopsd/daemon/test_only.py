"""``hops submit --test-only``: when a job would start and finish, without submitting it.

The job as it would be tagged is added to the live state (the ledger's jobs,
what Slurm runs now, what hopsd has learned) and hopsd's step is run forward
(:mod:`hopsd.sim.forecast`): once with the job as submitted, which is what
hops expects, and once for each GPU type and count it could get. The job runs
at what earlier jobs of its ``--model`` measured, else at the type table's
rate, as hopsd assumes; it joins the queue after hopsd's queue refresh and,
where hopsd profiles new jobs, after the profiling phase hopsd measured of the
latest jobs. Tagged jobs Slurm has that hopsd has not adopted yet are in the
queue ahead of it.

Whoever may read the whole ledger (root, hopsd's account, or anyone where the
ledger is not private) computes this in their own process. Anyone else asks
hopsd over its socket (:mod:`hopsd.daemon.readservice`): hopsd runs the same
forecast on everything it sees, as Slurm's own ``sbatch --test-only`` does under
``PrivateData``, and answers with the asked job's times only.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hopsd.config import HopsConfig
from hopsd.core.model import Cluster
from hopsd.daemon.views import Observation
from hopsd.ledger.unit import Unit
from hopsd.sim.forecast import ForecastInput, Hypothetical, Predicted, forecast
from hopsd.slurm.port import SlurmPort
from hopsd.slurm.tag import HopsTag

ASKED = "test-only"


def allowed_types(tag: HopsTag, types: Sequence[str]) -> list[str]:
    """The managed types the job may run on (its --types, minus its --exclude-types)."""
    chosen = [t for t in types if not tag.types or t in tag.types]
    return [t for t in chosen if t not in tag.exclude_types]


def assumed_rates(
    unit: Unit, cluster: Cluster, tag: HopsTag, table: dict[str, float]
) -> dict[str, float]:
    """Single-GPU samples/s per type hopsd would assume of the job: what earlier jobs of its
    ``--model`` (at its batch size) measured, the other types scaled by the types' speeds
    from a measured one (as hopsd derives them); the type table for a model never seen."""
    from hopsd.core.estimator import expected_iteration_time
    from hopsd.slurm.tag import UNKNOWN_MODEL

    if tag.model == UNKNOWN_MODEL:
        return dict(table)
    key = (tag.model, tag.batch_size)
    measured: dict[str, float] = {}
    for _job, gpu_type, profile in unit.model_profiles([key]).get(key, []):  # newest first
        gpu = cluster.gpu_types.get(gpu_type)
        if gpu is None or gpu_type in measured:
            continue
        t_iter = expected_iteration_time(profile, tag.params, 1, 1, gpu.b_link, gpu.b_net)
        measured[gpu_type] = tag.batch_size / t_iter
    if not measured:
        return dict(table)
    base, rate = next(iter(sorted(measured.items())))
    speed = cluster.gpu_types[base].speed
    return {t: measured.get(t, rate * cluster.gpu_types[t].speed / speed) for t in sorted(table)}


def _not_adopted(
    obs: Observation, adopted: set[int], rates: dict[str, float], now: float
) -> list[Hypothetical]:
    """Tagged jobs Slurm has that hopsd has not adopted yet (submitted seconds ago): they
    are ahead in the queue, so the forecast counts them as jobs hops never saw."""
    out = []
    for seen in obs.jobs:
        tag = seen.tag
        if tag is None or seen.slurm_id in adopted or seen.final:
            continue
        types = allowed_types(tag, sorted(rates))
        if types:
            out.append(
                Hypothetical(
                    f"slurm-{seen.slurm_id}",
                    tag.demands,
                    tag.total_samples,
                    {t: rates[t] for t in types},
                    tag.batch_size,
                    tag.params,
                    seen.user,
                    max(now - (seen.submit_time or now), 0.0),
                )
            )
    return out


def _input(
    config: HopsConfig, unit: Unit, port: SlurmPort, now: float
) -> tuple[ForecastInput, Observation]:
    """The forecast's input: the live state as the tick's step is given it, work under way
    (hopsd's pending intents, unplanned starts) included: the forecast's own step
    plans around it (:func:`hopsd.core.reserve.reserve`) until it lands."""
    from dataclasses import replace

    from hopsd.core.step import RoundClock
    from hopsd.daemon.assemble import assemble
    from hopsd.daemon.flights import in_flight, unplanned
    from hopsd.daemon.forecasting import measured_input
    from hopsd.daemon.observe import observe

    obs = observe(port, lambda: now)
    rows = [r for r in unit.active_jobs() if r.slurm_job_id is not None]
    ids = [r.id for r in rows]
    built = assemble(
        rows, obs, config, unit.latest_targets(ids), unit.throughput_snapshot(ids), now
    )
    flying = replace(built.snapshot, in_flight=in_flight(unit), unplanned=unplanned(rows))
    last = unit.latest_round()
    clock = RoundClock(config.round_length_s, None if last is None else last.started_at)
    given = measured_input(unit, config, flying, clock, test_only=True)
    return given, obs


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
    given, obs = _input(config, unit, port, now)
    cluster = given.snapshot.cluster
    every = {t: given.settings.reference_throughput * g.speed for t, g in cluster.gpu_types.items()}
    types = allowed_types(tag, sorted(cluster.gpu_types))
    table = assumed_rates(unit, cluster, tag, {t: every[t] for t in types})
    largest = {t: sum(n.gpus for n in cluster.nodes if n.gpu_type == t) for t in types}
    adopted = {int(j.slurm_job_id) for j in unit.active_jobs() if j.slurm_job_id is not None}
    ahead = _not_adopted(obs, adopted, every, now)

    def ask(demands: tuple[int, ...], rates: dict[str, float]) -> Predicted:
        job = Hypothetical(
            ASKED, demands, tag.total_samples, rates, tag.batch_size, tag.params, user
        )
        return forecast(given, [*ahead, job])[ASKED]

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
        "queued_jobs": len(given.snapshot.queued) + len(ahead),
        "running_jobs": len(given.snapshot.running),
        "expected": expected,
        "options": options,
    }


#: What a user sends hopsd to ask a forecast: this line, then the job's tag on one line.
FORECAST = b"forecast\n"
#: The longest tag hopsd reads (a real one is a few hundred bytes).
MAX_TAG_BYTES = 8192
#: hopsd forecasts for one user at most once this often; a repeat of the same question
#: in between gets the same answer.
FORECAST_EVERY_S = 5.0


class ForecastRefused(Exception):
    """hopsd will not forecast this now (a malformed tag, or asked too often)."""


class Forecaster:
    """hopsd's side of ``--test-only`` for users who may not read its ledger.

    The forecast runs on hopsd's whole view, so a user under ``PrivateData``
    learns when their job would start, as ``sbatch --test-only`` tells them,
    but nothing of whose jobs stand ahead: the answer carries the asked job's
    times and, for a viewer Slurm hides other jobs from, no job counts. Each
    user gets one forecast per :data:`FORECAST_EVERY_S`: a flood of questions
    costs hopsd no more than one user asking politely.
    """

    def __init__(self, compute: Callable[[HopsTag, str], dict[str, Any]]) -> None:
        self._compute = compute
        self._last: dict[str, tuple[float, str, dict[str, Any]]] = {}

    def answer(self, tag_text: str, user: str, hides_others: bool) -> dict[str, Any]:
        from hopsd.slurm.tag import TagError, decode

        now = time.monotonic()
        last = self._last.get(user)
        if last is not None and now - last[0] < FORECAST_EVERY_S:
            if last[1] == tag_text:
                return last[2]
            wait = FORECAST_EVERY_S - (now - last[0])
            raise ForecastRefused(
                f"one forecast per {FORECAST_EVERY_S:g} s: ask again in {wait:.0f} s"
            )
        try:
            tag = decode(tag_text)
        except TagError as exc:
            raise ForecastRefused(f"not a job hops could run: {exc}") from exc
        payload = self._compute(tag, user)
        if hides_others:
            payload = {**payload, "queued_jobs": None, "running_jobs": None}
        self._last[user] = (now, tag_text, payload)
        return payload


def ask_hopsd(
    ledger: Path, owner_uid: int, tag: HopsTag, timeout_s: float = 60.0
) -> dict[str, Any]:
    """The ``--test-only`` document, asked of the hopsd that keeps the private ``ledger``.

    Only a server running as the ledger's owner (or root) is believed.
    """
    from hopsd.ledger.errors import LedgerUnavailableError
    from hopsd.ledger.private_copy import hopsd_socket

    with hopsd_socket(ledger, owner_uid, timeout_s) as conn:
        conn.sendall(FORECAST + tag.encode().encode() + b"\n")
        reply = _read_all(conn)
    head, _, body = reply.partition(b"\n")
    if head != b"ok":
        text = reply.decode(errors="replace").strip() or "no answer"
        raise LedgerUnavailableError(f"hopsd could not forecast the job: {text}")
    answer: dict[str, Any] = json.loads(body)
    return answer


def _read_all(conn: socket.socket, limit: int = 1 << 22) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit and (chunk := conn.recv(65536)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
