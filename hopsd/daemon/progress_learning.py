"""Learning from what a job says about itself: samples done and per-GPU rates.

The probe's JSON-lines reports (:mod:`hopsd.daemon.sensing`) are read first;
a job without the probe may write a single progress file instead. Either way,
what a job claims is checked against where Slurm says it runs before the core's
one learning rule (:func:`hopsd.core.learning.learn`) takes it.
"""

from __future__ import annotations

from hopsd.core.learning import learn
from hopsd.core.model import Cluster, Configuration
from hopsd.daemon.job_reports import ProgressReport
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.snapshot_builder import ClusterView
from hopsd.daemon.views import RUNNING, ObservedJob
from hopsd.ledger.measurements import MeasurementStore
from hopsd.ledger.records import JobRecord, JobState


class ProgressLearner:
    """Folds each tick's fresh job-side reports into the ledger's measurements."""

    def __init__(self, sensing: Sensing) -> None:
        self.sensing = sensing
        self.problems = sensing.problems
        # The time of the last progress file read per job: each is learned from once.
        self._report_seen: dict[str, float] = {}

    def forget(self, job_id: str, slurm_id: int) -> None:
        """Drop what is kept of a job that ended (see :meth:`Sensing.forget`)."""
        self._report_seen.pop(job_id, None)
        self.sensing.forget(job_id, slurm_id)

    def final_samples(self, row: JobRecord) -> float | None:
        """The job's last word on its progress: the probe's final flush, else its
        progress file (a job without the probe)."""
        slurm_id = int(row.slurm_job_id or 0)
        said = self.sensing.final_samples(row, slurm_id)
        progress = self.sensing.read_progress(slurm_id, row.user)
        if progress is not None and progress.samples_done is not None:
            filed = min(progress.samples_done, row.total_samples)
            said = filed if said is None else max(said, filed)
        return said

    def learn(
        self,
        store: MeasurementStore,
        row: JobRecord,
        seen: ObservedJob,
        view: ClusterView,
        now: float,
    ) -> None:
        """Fold fresh job-side reports into samples done and the measured layers.

        The probe's JSON-lines reports (:mod:`hopsd.daemon.sensing`) win; the
        single progress file of jobs without the probe is the fallback.
        """
        state = JobState(row.state)
        if state not in (JobState.RUNNING, JobState.PROFILING):
            return
        config = row.current if seen.state == RUNNING else None
        if self.sensing.ingest(store, row, seen, config, view.cluster):
            return
        if state != JobState.RUNNING:
            return
        progress = self.sensing.read_progress(int(row.slurm_job_id or 0), row.user)
        if progress is None or progress.at == self._report_seen.get(row.id):
            return
        if progress.at is not None:
            self._report_seen[row.id] = progress.at
        if progress.samples_done is not None:
            store.note_samples_done(row.id, min(progress.samples_done, row.total_samples))
            self.sensing.note_beyond(row, progress.samples_done)
        if config is not None:
            self.learn_rate(store, row, progress, config, view.cluster)

    def learn_rate(
        self,
        store: MeasurementStore,
        row: JobRecord,
        progress: ProgressReport,
        config: Configuration,
        cluster: Cluster,
    ) -> None:
        """The per-GPU rate a progress file states, where Slurm says the job runs.

        The file's own ``nodes``/``gpus``/``gpu_type`` must agree with the job's
        placement; a job claiming a rate on nodes it does not hold is refused,
        so no user can teach hops a speed for a place they never ran on. The
        rate is learned by the core's one rule (:func:`hopsd.core.learning.learn`).
        """
        per_gpu = progress.per_gpu
        if per_gpu is None or per_gpu <= 0 or not progress.nodes or progress.gpus is None:
            return
        held = set(config.node_ids)
        claims_type = progress.gpu_type not in (None, config.gpu_type)
        if not set(progress.nodes) <= held or claims_type:
            self.problems.note(
                int(row.slurm_job_id or 0),
                "progress file ignored: its nodes or GPU type are not where the job runs",
                "progress",
            )
            return
        for update in learn(store, row.id, config, cluster, per_gpu):
            store.put_learned(row.id, update)

    # -- jobs gone from the queue --------------------------------------------------------
