"""The three-layer throughput store in SQL.

:class:`SqlThroughputStore` implements the core's ``ThroughputStore`` protocol
row by row (fine for the CLI and for writers). The planner looks throughputs up
thousands of times per round, so the daemon instead calls
:func:`load_throughput_store` once per round: two queries fill an
``InMemoryThroughputStore`` with everything known about the jobs in the round.

Measured rows keep learning: :meth:`SqlThroughputStore.observe` folds a new
measurement into an exponentially weighted moving average and counts the
observations and samples behind it, so a noisy first report does not stick.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from hopsd.core.errors import InvalidInputError
from hopsd.core.learning import ALPHA, Learned, fold
from hopsd.core.throughput import InMemoryThroughputStore, Mixture, PhaseProfile
from hopsd.ledger.models import ProfileRow, ThroughputLayer, ThroughputRow

L = ThroughputLayer

DEFAULT_ALPHA = ALPHA


class SqlThroughputStore:
    """``ThroughputStore`` over the ledger, plus writers for every layer.

    ``now`` stamps rows written through this object (epoch seconds).
    """

    def __init__(self, session: Session, now: float = 0.0) -> None:
        self.session = session
        self.now = now

    # -- read side: the core's protocol -------------------------------------------------
    def entity_aggregated(self, job_id: str, node_id: str, gpus: int) -> float | None:
        return self._get(job_id, L.ENTITY_AGGREGATED, node_id, gpus)

    def entity_distributed(self, job_id: str, node_id: str, n_nodes: int) -> float | None:
        return self._get(job_id, L.ENTITY_DISTRIBUTED, node_id, n_nodes)

    def type_aggregated(self, job_id: str, gpu_type: str, gpus: int) -> float | None:
        return self._get(job_id, L.TYPE_AGGREGATED, gpu_type, gpus)

    def type_distributed(self, job_id: str, gpu_type: str, n_nodes: int) -> float | None:
        return self._get(job_id, L.TYPE_DISTRIBUTED, gpu_type, n_nodes)

    def profile(self, job_id: str, gpu_type: str) -> PhaseProfile | None:
        row = self.session.get(ProfileRow, (job_id, gpu_type))
        return None if row is None else profile_from_row(row)

    # -- write side ---------------------------------------------------------------------
    def set_entity_aggregated(self, job_id: str, node_id: str, gpus: int, thr: float) -> None:
        self._set(job_id, L.ENTITY_AGGREGATED, node_id, gpus, thr)

    def set_entity_distributed(self, job_id: str, node_id: str, n_nodes: int, thr: float) -> None:
        self._set(job_id, L.ENTITY_DISTRIBUTED, node_id, n_nodes, thr)

    def set_type_aggregated(self, job_id: str, gpu_type: str, gpus: int, thr: float) -> None:
        self._set(job_id, L.TYPE_AGGREGATED, gpu_type, gpus, thr)

    def set_type_distributed(self, job_id: str, gpu_type: str, n_nodes: int, thr: float) -> None:
        self._set(job_id, L.TYPE_DISTRIBUTED, gpu_type, n_nodes, thr)

    def observe(
        self,
        layer: ThroughputLayer,
        job_id: str,
        place: str,
        size: int,
        per_gpu: float,
        samples: float = 0.0,
        alpha: float = DEFAULT_ALPHA,
    ) -> float:
        """Fold one measured per-GPU throughput into the row; returns the new estimate.

        The first observation is taken as is; later ones move the estimate by
        ``alpha`` of the difference (EWMA), so it follows slow drift (warming
        caches) without jumping on a single noisy interval.
        """
        _check_positive(per_gpu)
        row = self.session.get(ThroughputRow, (job_id, ThroughputLayer(layer), place, size))
        if row is None:
            fold(None, per_gpu, alpha)  # the same checks
            self.session.add(_new_row(job_id, layer, place, size, per_gpu, samples, self.now))
            return per_gpu
        row.per_gpu = fold(row.per_gpu, per_gpu, alpha)
        row.observations += 1
        row.samples += samples
        row.updated_at = self.now
        return row.per_gpu

    def put_learned(self, job_id: str, update: Learned, samples: float = 0.0) -> None:
        """Store one estimate of :func:`hopsd.core.learning.learn`, counting the measurement."""
        _check_positive(update.per_gpu)
        key = (job_id, ThroughputLayer(update.layer), update.place, update.size)
        row = self.session.get(ThroughputRow, key)
        if row is None:
            layer = ThroughputLayer(update.layer)
            row = _new_row(job_id, layer, update.place, update.size, update.per_gpu, 0.0, self.now)
            self.session.add(row)
        else:
            row.per_gpu = update.per_gpu
            row.observations += 1
            row.updated_at = self.now
        row.samples = (row.samples or 0.0) + samples

    def set_profile(
        self, job_id: str, gpu_type: str, profile: PhaseProfile, iterations: int = 0
    ) -> None:
        """Store (or replace) the theory-layer entry of a job on a GPU type."""
        row = self.session.get(ProfileRow, (job_id, gpu_type))
        if row is None:
            row = ProfileRow(job_id=job_id, gpu_type=gpu_type)
            self.session.add(row)
        _fill_profile(row, profile)
        row.iterations = iterations
        row.updated_at = self.now

    def forget_job(self, job_id: str) -> None:
        """Drop every measurement and profile of a job (rows vanish with the job anyway)."""
        self.session.execute(delete(ThroughputRow).where(ThroughputRow.job_id == job_id))
        self.session.execute(delete(ProfileRow).where(ProfileRow.job_id == job_id))
        self.session.expire_all()

    def _get(self, job_id: str, layer: ThroughputLayer, place: str, size: int) -> float | None:
        row = self.session.get(ThroughputRow, (job_id, layer, place, size))
        return None if row is None else row.per_gpu

    def _set(self, job_id: str, layer: ThroughputLayer, place: str, size: int, thr: float) -> None:
        _check_positive(thr)
        row = self.session.get(ThroughputRow, (job_id, layer, place, size))
        if row is None:
            self.session.add(_new_row(job_id, layer, place, size, thr, 0.0, self.now))
            return
        row.per_gpu = thr
        row.updated_at = self.now


def load_throughput_store(
    session: Session, job_ids: Iterable[str] | None = None, chunk: int = 900
) -> InMemoryThroughputStore:
    """Everything known about ``job_ids`` (all jobs if None) as an in-memory store.

    Two queries per chunk of jobs, whatever the number of layers and rows.
    """
    store = InMemoryThroughputStore()
    if job_ids is None:
        _fill(store, session, None)
        return store
    ids = list(dict.fromkeys(job_ids))
    for start in range(0, len(ids), chunk):
        _fill(store, session, ids[start : start + chunk])
    return store


def profile_from_row(row: ProfileRow) -> PhaseProfile:
    return PhaseProfile(
        t_f=row.t_f,
        t_b=row.t_b,
        t_u=row.t_u,
        pattern=row.pattern,
        data=Mixture(
            row.data_p_hit,
            row.data_mu_hit,
            row.data_sigma_hit,
            row.data_mu_miss,
            row.data_sigma_miss,
        ),
        sync_wait=Mixture(
            row.wait_p_hit,
            row.wait_mu_hit,
            row.wait_sigma_hit,
            row.wait_mu_miss,
            row.wait_sigma_miss,
        ),
    )


_SETTERS = {
    L.ENTITY_AGGREGATED: InMemoryThroughputStore.set_entity_aggregated,
    L.ENTITY_DISTRIBUTED: InMemoryThroughputStore.set_entity_distributed,
    L.TYPE_AGGREGATED: InMemoryThroughputStore.set_type_aggregated,
    L.TYPE_DISTRIBUTED: InMemoryThroughputStore.set_type_distributed,
}


def _fill(store: InMemoryThroughputStore, session: Session, ids: list[str] | None) -> None:
    tput = select(ThroughputRow)
    prof = select(ProfileRow)
    if ids is not None:
        tput = tput.where(ThroughputRow.job_id.in_(ids))
        prof = prof.where(ProfileRow.job_id.in_(ids))
    for row in session.scalars(tput):
        _SETTERS[ThroughputLayer(row.layer)](store, row.job_id, row.place, row.size, row.per_gpu)
    for prow in session.scalars(prof):
        store.set_profile(prow.job_id, prow.gpu_type, profile_from_row(prow))


def _new_row(
    job_id: str,
    layer: ThroughputLayer,
    place: str,
    size: int,
    per_gpu: float,
    samples: float,
    now: float,
) -> ThroughputRow:
    if size <= 0:
        raise InvalidInputError(f"a GPU or node count must be > 0, got {size}")
    return ThroughputRow(
        job_id=job_id,
        layer=ThroughputLayer(layer),
        place=place,
        size=size,
        per_gpu=per_gpu,
        observations=1,
        samples=samples,
        updated_at=now,
    )


def _fill_profile(row: ProfileRow, profile: PhaseProfile) -> None:
    row.t_f, row.t_b, row.t_u, row.pattern = profile.t_f, profile.t_b, profile.t_u, profile.pattern
    d, w = profile.data, profile.sync_wait
    row.data_p_hit, row.data_mu_hit, row.data_sigma_hit = d.p_hit, d.mu_hit, d.sigma_hit
    row.data_mu_miss, row.data_sigma_miss = d.mu_miss, d.sigma_miss
    row.wait_p_hit, row.wait_mu_hit, row.wait_sigma_hit = w.p_hit, w.mu_hit, w.sigma_hit
    row.wait_mu_miss, row.wait_sigma_miss = w.mu_miss, w.sigma_miss


def _check_positive(value: float) -> None:
    if not value > 0:
        raise InvalidInputError(f"a measured throughput must be > 0, got {value}")
