"""The one learning rule: hopsd and the simulator learn the same estimates from the
same measurements (probe reports, progress files, simulated measurements)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import parse_config
from hopsd.core.learning import fold, learn
from hopsd.core.model import Configuration
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.daemon.job_reports import ProgressReport
from hopsd.daemon.reconcile import Reconciler
from hopsd.daemon.sensing import Sensing
from hopsd.ledger.models import JobRow
from hopsd.ledger.throughput_store import SqlThroughputStore, load_throughput_store
from hopsd.plugins import get_policy
from hopsd.sim.engine import Engine

sys.path.insert(0, str(Path(__file__).parents[1] / "sim"))
from sim_helpers import tiny_truth

ONE_SLOW = Configuration.of("slow", {"s00": 1})
OTHER_SLOW = Configuration.of("slow", {"s01": 1})
TWO_FAST = Configuration.of("fast", {"f00": 2})
ACROSS = Configuration.of("slow", {"s00": 4, "s01": 4})
SEQUENCE = [
    (ONE_SLOW, 9.0),
    (ONE_SLOW, 11.0),
    (OTHER_SLOW, 7.0),  # a worse server of the same type: the type keeps the best one
    (ONE_SLOW, 10.0),
    (TWO_FAST, 38.0),
    (TWO_FAST, 40.0),
    (ACROSS, 8.5),
    (ACROSS, 9.5),
]
KEYS = [
    ("entity_aggregated", "s00", 1),
    ("entity_aggregated", "s01", 1),
    ("type_aggregated", "slow", 1),
    ("entity_aggregated", "f00", 2),
    ("type_aggregated", "fast", 2),
    ("entity_distributed", "s00", 2),
    ("entity_distributed", "s01", 2),
    ("type_distributed", "slow", 2),
]


def estimates(store: Any) -> dict[tuple[str, str, int], float | None]:
    return {(m, p, n): getattr(store, m)("j", p, n) for m, p, n in KEYS}


def simulated() -> dict[tuple[str, str, int], float | None]:
    engine = Engine(tiny_truth(), [], get_policy("fifo"))
    for config, per_gpu in SEQUENCE:
        engine.learn_measurement("j", config, per_gpu)
    return estimates(engine.store)


def test_by_hand() -> None:
    got = simulated()
    s00 = fold(fold(fold(None, 9.0), 11.0), 10.0)
    assert s00 == pytest.approx(0.7 * (0.7 * 9 + 0.3 * 11) + 0.3 * 10)
    assert got[("entity_aggregated", "s00", 1)] == pytest.approx(s00)
    assert got[("entity_aggregated", "s01", 1)] == pytest.approx(7.0)
    assert got[("type_aggregated", "slow", 1)] == pytest.approx(s00)  # best server
    assert got[("type_aggregated", "fast", 2)] == pytest.approx(0.7 * 38 + 0.3 * 40)
    assert got[("type_distributed", "slow", 2)] == pytest.approx(0.7 * 8.5 + 0.3 * 9.5)
    assert len(learn(InMemoryThroughputStore(), "j", ACROSS, tiny_truth().cluster, 1.0)) == 3


@pytest.mark.parametrize("source", ["probe", "progress"])
def test_hopsd_learns_what_the_simulator_learns(
    sessions: sessionmaker[Session], tmp_path: Path, source: str
) -> None:
    cluster = tiny_truth().cluster
    row = JobRow(
        id="j",
        slurm_job_id=1,
        user="u",
        demands=[1],
        total_samples=1e6,
        batch_size=10,
        state_changed_at=0.0,
        submit_time=0.0,
        updated_at=0.0,
    )
    with sessions.begin() as session:
        session.add(row)
    sensing = Sensing(tmp_path)
    reconciler = Reconciler(parse_config(""), lambda ids: {}, None, sensing)
    for config, per_gpu in SEQUENCE:
        with sessions.begin() as session:
            store = SqlThroughputStore(session, 0.0)
            if source == "probe":
                sensing._measured(store, row, config, cluster, per_gpu, 100.0)
            else:
                report = ProgressReport(
                    samples_done=1.0,
                    at=1.0,
                    per_gpu=per_gpu,
                    nodes=config.node_ids,
                    gpus=config.total_gpus,
                    gpu_type=config.gpu_type,
                )
                reconciler.learner.learn_rate(store, row, report, config, cluster)
    with sessions.begin() as session:
        daemon = estimates(load_throughput_store(session))
    sim = simulated()
    assert daemon.keys() == sim.keys()
    for key, value in sim.items():
        assert value is not None and daemon[key] == pytest.approx(value, rel=1e-12), key
