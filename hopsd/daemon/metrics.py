"""Prometheus metrics of hopsd (prometheus-client), on their own registry.

A registry per daemon instance keeps tests free of global state; the HTTP
endpoint (:mod:`hopsd.daemon.endpoint`, with ``/healthz``) is started only
when ``metrics.address`` is not empty. Counters carry no ``_created`` series
(they double the series count and no dashboard of hops reads them).

Enactments are counted per plan entry (``kind``: start, move, preempt,
profile, hold, notice) once its chain of Slurm actions has an outcome; the
Slurm actions themselves are counted per verb in ``hopsd_slurm_actions_total``.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Mapping, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

import hopsd
from hopsd.daemon.decide import MOVE, PREEMPT, PROFILE, START
from hopsd.daemon.enact import EnactReport, Step
from hopsd.daemon.endpoint import Check, Endpoint
from hopsd.daemon.gpu_use import GpuUse
from hopsd.daemon.problems import InputProblems
from hopsd.ledger.records import IntentAction
from hopsd.views.routes import Page, Under

_TICK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

disable_created_metrics()


class DaemonMetrics:
    """Every series hopsd exports."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.endpoint: Endpoint | None = None
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        Info("hopsd_build", "Version of hopsd and of the Python running it", registry=r).info(
            {"version": hopsd.__version__, "python": platform.python_version()}
        )
        self._tick_series(r)
        self._cluster_series(r)
        self._action_series(r)
        self._outcome_series(r)

    def _tick_series(self, r: CollectorRegistry) -> None:
        """How long ticks and decisions take, and whether this hopsd leads."""
        self.tick_seconds = Histogram(
            "hopsd_tick_seconds", "Duration of one tick", buckets=_TICK_BUCKETS, registry=r
        )
        self.last_tick = Gauge(
            "hopsd_last_tick_timestamp_seconds",
            "Unix time the last tick that completed started",
            registry=r,
        )
        self.leader = Gauge(
            "hopsd_leader", "1 while this hopsd holds the ledger lease and may enact", registry=r
        )
        self.decision_seconds = Histogram(
            "hopsd_decision_seconds",
            "Time spent in the core planner per decision",
            ["kind"],
            buckets=_TICK_BUCKETS,
            registry=r,
        )

    def _cluster_series(self, r: CollectorRegistry) -> None:
        """The queue, the GPUs per type and the jobs' latency ratios, as of the last tick."""
        self.queue_length = Gauge("hopsd_queue_length", "Hops jobs waiting", registry=r)
        self.running_jobs = Gauge("hopsd_running_jobs", "Hops jobs running", registry=r)
        self.window_size = Gauge("hopsd_window_size", "Jobs in the service window", registry=r)
        self.idle_gpus_waiting = Gauge(
            "hopsd_idle_gpus_while_waiting", "GPUs left idle while jobs wait", registry=r
        )
        self.gpus_total = Gauge(
            "hopsd_gpus_total", "GPUs of the managed partitions", ["gpu_type"], registry=r
        )
        self.gpus_busy = Gauge(
            "hopsd_gpus_busy",
            "GPUs in use (hops jobs, other jobs, drained nodes)",
            ["gpu_type"],
            registry=r,
        )
        self.gpus_idle = Gauge(
            "hopsd_gpus_idle", "GPUs hops could hand out now", ["gpu_type"], registry=r
        )
        self.gpus_queued = Gauge(
            "hopsd_gpus_queued_demand",
            "Smallest GPU counts of waiting jobs that fit the type",
            ["gpu_type"],
            registry=r,
        )
        self.max_latency_ratio = Gauge(
            "hopsd_latency_ratio_max", "Largest latency ratio among active jobs", registry=r
        )
        self.p99_latency_ratio = Gauge(
            "hopsd_latency_ratio_p99",
            "99th percentile (nearest rank) of the active jobs' latency ratios",
            registry=r,
        )

    def _action_series(self, r: CollectorRegistry) -> None:
        """What hopsd asked of Slurm, and how it went."""
        self.enactments = Counter(
            "hopsd_enactments",
            "Plan entries enacted, by kind and outcome",
            ["kind", "result"],
            registry=r,
        )
        self.would_enact = Counter(
            "hopsd_would_enact",
            "Shadow mode: new decisions that would have been enacted, by kind",
            ["kind"],
            registry=r,
        )
        self.slurm_actions = Counter(
            "hopsd_slurm_actions", "Slurm actions taken, by verb", ["action", "result"], registry=r
        )
        self.slurm_errors = Counter(
            "hopsd_slurm_errors", "Slurm failures seen", ["kind"], registry=r
        )
        self.slurm_calls = Counter("hopsd_slurm_calls", "Slurm commands run", registry=r)

    def _outcome_series(self, r: CollectorRegistry) -> None:
        """Jobs adopted and refused, ledger rows pruned, inputs refused, failures contained."""
        self.tick_errors = Counter("hopsd_tick_errors", "Ticks that raised", registry=r)
        self.adopted = Counter("hopsd_jobs_adopted", "Jobs adopted", registry=r)
        self.rejected = Counter("hopsd_tags_rejected", "Tagged jobs refused", registry=r)
        self.pruned = Counter(
            "hopsd_ledger_rows_pruned",
            "Ledger rows removed by retention, by table",
            ["table"],
            registry=r,
        )
        self.inputs_refused = Counter(
            "hopsd_user_inputs_refused",
            "User-controlled inputs refused (report lines, progress files, work dirs, ...)",
            ["input"],
            registry=r,
        )
        self.jobs_skipped = Counter(
            "hopsd_job_failures_contained",
            "Failures while working on one job, contained to that job for the tick",
            ["step"],
            registry=r,
        )

    def watch(self, problems: InputProblems) -> None:
        """Count what ``problems`` records (refused inputs, contained failures) in this registry."""
        problems.count_refused = lambda kind: self.inputs_refused.labels(kind).inc()
        problems.count_failed = lambda step: self.jobs_skipped.labels(step).inc()

    def set_gpus(self, use: Mapping[str, GpuUse]) -> None:
        for gpu_type, u in use.items():
            self.gpus_total.labels(gpu_type).set(u.total)
            self.gpus_busy.labels(gpu_type).set(u.busy)
            self.gpus_idle.labels(gpu_type).set(u.idle)
            self.gpus_queued.labels(gpu_type).set(u.queued_demand)

    def count_enacted(self, report: EnactReport) -> None:
        """Slurm actions per verb, and plan entries per kind once their chain has an outcome."""
        for step in report.done:
            self.slurm_actions.labels(step.action.value, "ok").inc()
        for step, _ in report.failed:
            self.slurm_actions.labels(step.action.value, "failed").inc()
        for step, _ in report.abandoned:
            self.slurm_actions.labels(step.action.value, "abandoned").inc()
        for kind, result in enactment_outcomes(report):
            self.enactments.labels(kind, result).inc()

    def set_latency_ratios(self, ratios: Sequence[float]) -> None:
        """Max and p99 of the current ratios; 0 when no job is active (nobody waits)."""
        ordered = sorted(ratios)
        self.max_latency_ratio.set(ordered[-1] if ordered else 0.0)
        self.p99_latency_ratio.set(nearest_rank(ordered, 0.99) if ordered else 0.0)

    def serve(
        self,
        address: str,
        checks: Mapping[str, Check] | None = None,
        pages: Mapping[str, Page | Under] | None = None,
    ) -> None:
        """Expose ``/metrics``, ``/healthz`` (and the status ``pages``) at ``HOST:PORT``
        (no-op for an empty address)."""
        if not address:
            return
        self.endpoint = Endpoint(self.registry, checks or {}, address, pages)

    def close(self) -> None:
        """Stop serving and free the port (a no-op when nothing is served)."""
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values by the nearest-rank rule (a value that occurred)."""
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def enactment_outcomes(report: EnactReport) -> list[tuple[str, str]]:
    """(kind, result) of each plan entry whose chain got its outcome in ``report``.

    A chain's outcome is ``failed`` or ``abandoned`` as soon as one of its steps
    is; ``ok`` when its final step is done. A chain cut short by waiting for
    Slurm (a requeued job not yet off its nodes) is counted when a later tick
    finishes it, so every plan entry is counted once.
    """
    out: list[tuple[str, str]] = []
    bad: dict[str, tuple[str, str]] = {}
    for step, _ in report.failed:
        bad.setdefault(step.job_id, (_kind(step), "failed"))
    for step, _ in report.abandoned:
        bad.setdefault(step.job_id, (_kind(step), "abandoned"))
    out.extend(bad.values())
    for step in report.done:
        if step.job_id not in bad and _final(step):
            out.append((_kind(step), "ok"))
    return out


def _kind(step: Step) -> str:
    return str(step.payload.get("kind") or step.action.value)


def _final(step: Step) -> bool:
    """The last step of its chain (:func:`hopsd.daemon.decide.intent_chain`)."""
    A = IntentAction
    kind = _kind(step)
    if kind in (START, MOVE, PROFILE):
        return step.action == A.RELEASE
    if kind == PREEMPT:
        return step.action == A.REQUEUE_HOLD
    return True  # single-step kinds (hold, notice, cancel)
