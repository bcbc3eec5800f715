"""START and ETA: hopsd forecasts after each plan, records what changed, and shows the newest.

Against the in-memory Slurm: two jobs that each need all eight A100s. The first
runs, the second must wait for it; hopsd knows neither job's speed but the type
table, so the forecast's times follow from it exactly.
"""

from __future__ import annotations

import pytest
from daemon_fakeport import FakeClock, FakePort
from spool_tick import make_tick
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig
from hopsd.ledger.records import Prediction
from hopsd.ledger.unit import Ledger
from hopsd.slurm.tag import HopsTag
from hopsd.views.joblist import daemon_state, job_record

SECONDS = 200.0  # each job's run at the type table's rate on 8 A100s


def predictions(sessions: sessionmaker[Session], jobs: list[int]) -> dict[str, list[Prediction]]:
    with Ledger(sessions).reading() as unit:
        return dict(unit.job_predictions([str(j) for j in jobs]))


def test_the_forecast_shares_the_gpus_as_the_step_will_and_is_written_when_it_changes(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    """Both jobs need all eight A100s: one is started, the other waits. The forecast runs
    hopsd's step on: the latency-ratio queue takes turns between the two (a round is
    10 s, a restart 1 s here), the eight GPUs never idle, so the last one ends after
    both jobs' work plus what the restarts cost."""
    per_gpu = config.settings().reference_throughput * config.gpu_types["a100"].speed
    tag = HopsTag((8,), SECONDS * 8 * per_gpu, types=("a100",))
    jobs = [
        port.add_job(tag, user="alice", submit_time=clock.now - 5),
        port.add_job(tag, user="bob", submit_time=clock.now - 4),
    ]
    tick = make_tick(config, port, sessions, clock)
    result = tick.run_once()  # one is placed and released; the forecast follows the plan
    assert result.decision is not None and len(result.decision.plan.start) == 1
    started = int(result.decision.plan.start[0].job_id)
    (waiting_id,) = [j for j in jobs if j != started]
    made = clock.now
    said = predictions(sessions, jobs)
    (running,) = said[str(started)]
    (waiting,) = said[str(waiting_id)]
    assert running.made_at == made and running.start_at is None
    assert waiting.state == "queued" and waiting.start_at is not None
    assert made < waiting.start_at <= made + config.settings().round_length_s + 1e-6
    assert (waiting.gpu_type, waiting.gpus) == ("a100", 8)
    ends = [running.end_at, waiting.end_at]
    assert None not in ends
    last = max(e for e in ends if e is not None)
    restarts = (last - made - 2 * SECONDS) / config.settings().restart_penalty_s
    assert 0 <= restarts <= 2 * (2 * SECONDS) / config.settings().round_length_s

    for _ in range(3):
        clock.advance(1)
        tick.run_once()
    again = predictions(sessions, jobs)
    # the started job now runs (its state changed: one new row); then nothing changes
    assert [len(again[str(started)]), len(again[str(waiting_id)])] == [2, 1]
    assert again[str(started)][-1].state == "running"

    with Ledger(sessions).reading() as unit:
        row = unit.jobs_by_slurm_ids([waiting_id])[waiting_id]
        shown = job_record(row, clock.now, daemon_state(None, None, clock.now), waiting, 1)
    assert shown["start_in_s"] == pytest.approx(waiting.start_at - clock.now, abs=0.1)


def test_a_forecast_that_fails_leaves_scheduling_alone(
    config: HopsConfig,
    port: FakePort,
    sessions: sessionmaker[Session],
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hopsd.daemon.forecasting as forecasting

    def broken(*_: object, **__: object) -> dict[str, object]:
        raise RuntimeError("forecast bug")

    monkeypatch.setattr(forecasting, "forecast", broken)
    job = port.add_job(HopsTag((4,), 1000.0), user="alice")
    tick = make_tick(config, port, sessions, clock)
    tick.run_once()
    clock.advance(1)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING"
    assert predictions(sessions, [job])[str(job)] == []


@pytest.fixture
def two_jobs_make_a_long_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hopsd.daemon.forecasting.DEFER_AFTER_ADOPTING", 2)


@pytest.mark.usefixtures("two_jobs_make_a_long_queue")
def test_a_tick_adopting_a_long_queue_forecasts_at_the_next_tick(
    config: HopsConfig, port: FakePort, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    """Adopting a long queue makes a long tick: its forecast waits for the next tick,
    which makes it although nothing changed in between (two jobs stand for the queue)."""
    per_gpu = config.settings().reference_throughput * config.gpu_types["a100"].speed
    tag = HopsTag((8,), SECONDS * 8 * per_gpu, types=("a100",))
    jobs = [port.add_job(tag, user=u, submit_time=clock.now - 5) for u in ("alice", "bob")]
    tick = make_tick(config, port, sessions, clock)
    first = tick.run_once()
    assert first.reconcile is not None and len(first.reconcile.adopted) == 2
    assert first.forecast_s == 0.0
    assert not any(predictions(sessions, jobs).values())
    clock.advance(1)
    assert tick.run_once().forecast_s > 0.0
    said = predictions(sessions, jobs)
    assert all(said[str(j)] for j in jobs)
