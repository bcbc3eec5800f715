"""The planner's per-server speed prior as hopsd reads it from the ledger."""

from __future__ import annotations

from typing import Any, cast

import pytest

from hopsd.core.model import Cluster, GpuType, Node
from hopsd.daemon.node_speeds import NodeSpeeds
from hopsd.ledger.records import ThroughputLayer, ThroughputRecord

CLUSTER = Cluster.build(
    [GpuType("v100", speed=2.0)], [Node("v100n1", "v100", 4), Node("v100n2", "v100", 4)]
)


class Rows:
    """The one ledger read the prior needs: every row of a layer."""

    def __init__(self, rows: list[ThroughputRecord]) -> None:
        self.rows = rows
        self.reads = 0

    def throughputs(self, layer: ThroughputLayer) -> list[ThroughputRecord]:
        self.reads += 1
        return [r for r in self.rows if r.layer == layer]


def record(job: str, node: str, per_gpu: float, layer: Any = None) -> ThroughputRecord:
    return ThroughputRecord(job, layer or ThroughputLayer.ENTITY_AGGREGATED, node, 1, per_gpu)


def test_finished_jobs_rows_give_the_prior_and_it_is_read_again_only_after_a_while() -> None:
    unit = Rows(
        [
            record("35", "v100n1", 368.5),
            record("35", "v100n2", 181.3),
            record("35", "v100", 368.5, ThroughputLayer.TYPE_AGGREGATED),
        ]
    )
    speeds = NodeSpeeds(every_s=30.0)
    assert speeds.prior(cast(Any, unit), CLUSTER, 100.0) == {"v100n2": pytest.approx(0.5)}
    unit.rows.append(record("39", "v100n1", 395.6))
    unit.rows.append(record("39", "v100n2", 300.0))  # a second job, slowed less
    assert speeds.prior(cast(Any, unit), CLUSTER, 120.0) == {"v100n2": pytest.approx(0.5)}
    assert unit.reads == 1
    assert speeds.prior(cast(Any, unit), CLUSTER, 131.0) == {"v100n2": pytest.approx(0.75)}
