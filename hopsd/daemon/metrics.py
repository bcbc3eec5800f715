"""Prometheus metrics of hopsd (prometheus-client), on their own registry.

A registry per daemon instance keeps tests free of global state; the HTTP
endpoint is started only when ``metrics.address`` is not empty.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from hopsd.daemon.problems import InputProblems

_TICK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class DaemonMetrics:
    """Every series hopsd exports."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.tick_seconds = Histogram(
            "hopsd_tick_seconds", "Duration of one tick", buckets=_TICK_BUCKETS, registry=r
        )
        self.decision_seconds = Histogram(
            "hopsd_decision_seconds",
            "Time spent in the core planner per decision",
            ["kind"],
            buckets=_TICK_BUCKETS,
            registry=r,
        )
        self.queue_length = Gauge("hopsd_queue_length", "Hops jobs waiting", registry=r)
        self.running_jobs = Gauge("hopsd_running_jobs", "Hops jobs running", registry=r)
        self.window_size = Gauge("hopsd_window_size", "Jobs in the service window", registry=r)
        self.idle_gpus_waiting = Gauge(
            "hopsd_idle_gpus_while_waiting", "GPUs left idle while jobs wait", registry=r
        )
        self.max_latency_ratio = Gauge(
            "hopsd_latency_ratio_max", "Largest latency ratio among active jobs", registry=r
        )
        self.avg_latency_ratio = Gauge(
            "hopsd_latency_ratio_avg", "Mean latency ratio among active jobs", registry=r
        )
        self.enactments = Counter(
            "hopsd_enactments_total", "Slurm actions taken", ["action", "result"], registry=r
        )
        self.slurm_errors = Counter(
            "hopsd_slurm_errors_total", "Slurm failures seen", ["kind"], registry=r
        )
        self.slurm_calls = Counter("hopsd_slurm_calls_total", "Slurm commands run", registry=r)
        self.tick_errors = Counter("hopsd_tick_errors_total", "Ticks that raised", registry=r)
        self.adopted = Counter("hopsd_jobs_adopted_total", "Jobs adopted", registry=r)
        self.rejected = Counter("hopsd_tags_rejected_total", "Tagged jobs refused", registry=r)
        self.inputs_refused = Counter(
            "hopsd_user_inputs_refused_total",
            "User-controlled inputs refused (report lines, progress files, work dirs, ...)",
            ["input"],
            registry=r,
        )
        self.jobs_skipped = Counter(
            "hopsd_job_failures_contained_total",
            "Failures while working on one job, contained to that job for the tick",
            ["step"],
            registry=r,
        )

    def watch(self, problems: InputProblems) -> None:
        """Count what ``problems`` records (refused inputs, contained failures) in this registry."""
        problems.count_refused = lambda kind: self.inputs_refused.labels(kind).inc()
        problems.count_failed = lambda step: self.jobs_skipped.labels(step).inc()

    def serve(self, address: str) -> None:
        """Expose the registry over HTTP at ``HOST:PORT`` (no-op for an empty address)."""
        if not address:
            return
        host, _, port = address.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)
