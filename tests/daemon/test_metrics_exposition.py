"""What hopsd exports, read back through prometheus_client's own exposition parser.

The service runs real ticks against the in-memory Slurm; the test then scrapes
``/metrics`` and ``/healthz`` over HTTP, as Prometheus and a load balancer do.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from daemon_fakeport import a100_pays_8x
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from hopsd.daemon.enact import EnactReport, Step
from hopsd.daemon.metrics import DaemonMetrics, enactment_outcomes, nearest_rank
from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.ledger.engine import make_engine
from hopsd.ledger.health import ping, probe_engine
from hopsd.ledger.models import Base, IntentAction
from hopsd.slurm.tag import HopsTag

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(metrics: DaemonMetrics) -> tuple[Samples, set[str]]:
    """Every sample as {(name, sorted labels): value}, and the family names."""
    assert metrics.endpoint is not None
    url = f"http://127.0.0.1:{metrics.endpoint.port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    samples: Samples = {}
    families: set[str] = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = s.value
    return samples, families


def healthz(metrics: DaemonMetrics) -> tuple[int, dict[str, object]]:
    assert metrics.endpoint is not None
    url = f"http://127.0.0.1:{metrics.endpoint.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def serving() -> Iterator[list[DaemonMetrics]]:
    started: list[DaemonMetrics] = []
    yield started
    for m in started:
        if m.endpoint is not None:
            m.endpoint.close()


def _service(config, port, sessions, clock, serving, **kw) -> Service:  # type: ignore[no-untyped-def]
    service = Service(Tick(config, port, sessions, clock=clock, **kw))
    service.metrics.serve("127.0.0.1:0", service.health_checks())
    serving.append(service.metrics)
    return service


def test_start_and_move_are_counted_by_kind_and_slurm_verbs_apart(
    config, port, sessions, clock, serving
):
    foreign = port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
    job = port.add_job(HopsTag((4,), 1e7))
    service = _service(config, port, sessions, clock, serving)
    service.run_once()
    a100_pays_8x(sessions, clock, job)
    port.finish(foreign)
    clock.advance(11)
    service.run_once()
    assert port.actions(job) == ["update", "release", "requeue_hold", "update",
                                 "make_eligible", "release"]  # fmt: skip
    samples, _ = scrape(service.metrics)
    assert samples[("hopsd_enactments_total", (("kind", "start"), ("result", "ok")))] == 1
    assert samples[("hopsd_enactments_total", (("kind", "move"), ("result", "ok")))] == 1
    assert ("hopsd_enactments_total", (("kind", "preempt"), ("result", "ok"))) not in samples
    release = ("hopsd_slurm_actions_total", (("action", "release"), ("result", "ok")))
    assert samples[release] == 2
    assert not any("_created" in name for name, _ in samples)
    assert samples[("hopsd_last_tick_timestamp_seconds", ())] == clock()
    assert samples[("hopsd_leader", ())] == 1


def test_build_process_and_per_gpu_type_series(config, port, sessions, clock, serving):
    # not hops' jobs: their GPUs are busy, not idle; 7 k80 and 5 a100 are left
    port.add_job(None, held=False, running_on={"fast1": 3, "slow1": 1})
    port.add_job(HopsTag((2,), 1e7))
    port.add_job(HopsTag((8,), 1e7))  # fits neither type now: waits
    service = _service(config, port, sessions, clock, serving)
    service.run_once()
    clock.advance(1)
    service.run_once()  # the gauges show the snapshot this tick planned on
    samples, families = scrape(service.metrics)
    (build,) = [k for k in samples if k[0] == "hopsd_build_info"]
    assert dict(build[1])["version"]
    assert "process_cpu_seconds" in families and "process_resident_memory_bytes" in families
    assert "python_info" in families

    def gpus(name: str, gpu_type: str) -> float:
        return samples[(f"hopsd_gpus_{name}", (("gpu_type", gpu_type),))]

    assert gpus("total", "a100") == 8 and gpus("total", "k80") == 8
    assert gpus("busy", "a100") + gpus("busy", "k80") == 4 + 2  # others' and the 2-GPU job
    assert gpus("idle", "a100") + gpus("idle", "k80") == 16 - 4 - 2
    assert gpus("queued_demand", "a100") == 8 and gpus("queued_demand", "k80") == 8
    assert samples[("hopsd_queue_length", ())] == 1 and samples[("hopsd_running_jobs", ())] == 1


def test_queued_demand_counts_waiting_jobs_that_fit_the_type(
    config, port, sessions, clock, serving
):
    port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4, "slow1": 4, "slow2": 4})
    port.add_job(HopsTag((2, 4), 1e7))
    service = _service(config, port, sessions, clock, serving)
    service.run_once()
    samples, _ = scrape(service.metrics)
    assert samples[("hopsd_gpus_queued_demand", (("gpu_type", "k80"),))] == 2
    assert samples[("hopsd_gpus_idle", (("gpu_type", "k80"),))] == 0
    assert samples[("hopsd_queue_length", ())] == 1


def test_shadow_counts_and_logs_a_would_enact_once_not_every_tick(
    config, port, sessions, clock, serving, caplog
):
    port.add_job(HopsTag((1,), 1e7))
    service = _service(config, port, sessions, clock, serving, shadow=True)
    with caplog.at_level(logging.INFO, logger="hopsd.tick"):
        for _ in range(5):
            service.run_once()
            clock.advance(1)
    said = [r for r in caplog.records if "event=would-enact" in r.getMessage()]
    assert len(said) == 1
    samples, _ = scrape(service.metrics)
    assert samples[("hopsd_would_enact_total", (("kind", "start"),))] == 1
    assert not any(k[0] == "hopsd_enactments_total" for k in samples)
    assert port.calls == []


def test_latency_ratio_max_and_p99():
    metrics = DaemonMetrics()
    ratios = [1.0 + i / 100 for i in range(200)]
    metrics.set_latency_ratios(ratios)
    assert metrics.max_latency_ratio._value.get() == pytest.approx(2.99)  # type: ignore[attr-defined]
    assert metrics.p99_latency_ratio._value.get() == pytest.approx(2.97)  # type: ignore[attr-defined]
    metrics.set_latency_ratios([])
    assert metrics.max_latency_ratio._value.get() == 0  # type: ignore[attr-defined]
    assert nearest_rank([5.0], 0.99) == 5.0


def _step(intent: int, job: str, action: IntentAction, kind: str) -> Step:
    return Step(intent, job, action, {"slurm_id": 7, "kind": kind})


def test_a_chain_is_counted_once_when_it_has_an_outcome():
    A = IntentAction
    # a move cut short while the requeued job settles: nothing counted yet
    first = EnactReport(done=[_step(1, "j1", A.REQUEUE_HOLD, "move")])
    assert enactment_outcomes(first) == []
    later = EnactReport(
        done=[_step(2, "j1", A.UPDATE, "move"), _step(3, "j1", A.MAKE_ELIGIBLE, "move"),
              _step(4, "j1", A.RELEASE, "move")]
    )  # fmt: skip
    assert enactment_outcomes(later) == [("move", "ok")]
    failed = EnactReport(
        failed=[(_step(5, "j2", A.UPDATE, "start"), "refused")],
        abandoned=[(_step(6, "j2", A.RELEASE, "start"), "earlier step failed")],
    )
    assert enactment_outcomes(failed) == [("start", "failed")]
    preempt = EnactReport(done=[_step(7, "j3", A.REQUEUE_HOLD, "preempt")])
    assert enactment_outcomes(preempt) == [("preempt", "ok")]


def test_healthz_is_200_when_well_and_503_naming_slurm(config, port, sessions, clock, serving):
    port.add_job(HopsTag((1,), 1e4))
    service = _service(config, port, sessions, clock, serving)
    service.run_once()
    status, body = healthz(service.metrics)
    assert (status, body["status"]) == (200, "ok")
    port.down = True
    service.run_once()
    status, body = healthz(service.metrics)
    assert status == 503
    assert "slurmctld unreachable" in body["problems"]["slurm"]  # type: ignore[index]


def test_healthz_names_a_stale_tick(config, port, sessions, clock, serving):
    service = _service(config, port, sessions, clock, serving)
    service.run_once()
    assert service.last_tick_at is not None
    service.last_tick_at -= service.stale_after_s() + 5
    status, body = healthz(service.metrics)
    assert status == 503
    assert "last tick completed" in body["problems"]["tick"]  # type: ignore[index]


def test_ledger_ping_reports_an_unreachable_ledger(tmp_path, sessions: sessionmaker[Session]):
    engine = make_engine(f"sqlite:///{tmp_path / 'missing-dir' / 'ledger.sqlite'}")
    assert "unable to open database file" in (ping(engine) or "")
    good = sessions.kw["bind"]
    assert ping(good) is None


def test_ledger_probe_answers_while_a_tick_holds_the_write_lock(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    daemon = make_engine(url, sqlite_begin="immediate", timeout_ms=200)
    Base.metadata.create_all(daemon)
    with daemon.begin() as writing:  # a tick's unit of work, write lock held
        writing.execute(text("UPDATE rounds SET note = 'x'"))
        assert ping(probe_engine(url)) is None
        # the daemon's own engine would queue behind the tick and fail the check
        assert "locked" in (ping(make_engine(url, sqlite_begin="immediate", timeout_ms=200)) or "")
    daemon.dispose()
