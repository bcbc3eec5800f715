"""A policy's own settings from the simulation file's [policies.NAME] table reach the policy."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import cluster_toml

from hopsd.sim.knobs import Knobs, KnobsError, parse_knobs
from hopsd.sim.run import simulate
from hopsd.sim.seeds import simulate_seeds

# The fast node comes first, so FIFO's first fit puts a there and b on a slow node.
CLUSTER = cluster_toml(
    {"TitanXP": {"speed": 1.0}, "RTX3090": {"speed": 2.5}},
    ("f", 1, "RTX3090", 4),
    ("s", 2, "TitanXP", 4),
)
# c needs both slow nodes and waits for b; d fits on the free slow node and ends
# long before b: EASY backfill starts it at once, strict FIFO only behind c.
TRACE = """job_id,submit_time_s,demands,total_samples,model
a,0,4,4000000,resnet18
b,0,4,2000000,resnet18
c,1,8,400000,resnet18
d,2,4,100000,resnet18
"""


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "cluster.toml").write_text(CLUSTER)
    (tmp_path / "trace.csv").write_text(TRACE)
    return {"cluster": tmp_path / "cluster.toml", "trace": tmp_path / "trace.csv"}


def _fifo(inputs: dict[str, Path], table: dict[str, object]) -> dict[str, object]:
    doc = {"profiling_s": 0, "policies": {"fifo": table}}
    knobs = parse_knobs(doc, "sim.toml")
    return simulate(None, **inputs, policies=["fifo"], knobs=knobs)


def test_knobs_and_own_settings_share_the_policy_table() -> None:
    knobs = parse_knobs({"policies": {"fifo": {"round_length_s": 60, "backfill": False}}})
    assert knobs.for_policy("fifo") == Knobs(round_length_s=60.0)
    assert knobs.settings == {"fifo": {"backfill": False}}


def test_the_table_s_setting_changes_what_the_policy_does(inputs: dict[str, Path]) -> None:
    easy = _fifo(inputs, {})
    strict = _fifo(inputs, {"backfill": False})
    assert easy["policy_settings"] == {"fifo": {"backfill": True}}
    assert strict["policy_settings"] == {"fifo": {"backfill": False}}
    waits = [r["policies"]["fifo"]["avg_wait_h"] for r in (easy, strict)]  # type: ignore[index]
    # d starts at once with backfill and waits 324 s (until c starts) without
    assert waits[1] - waits[0] == pytest.approx(324 / 3600 / 4, rel=0.02)


def test_a_bad_setting_is_refused_naming_the_file_and_key(inputs: dict[str, Path]) -> None:
    unknown = r"^sim.toml: policies.fifo.backfil: unknown key \(known: backfill\)$"
    with pytest.raises(KnobsError, match=unknown):
        _fifo(inputs, {"backfil": False})
    with pytest.raises(KnobsError, match=r"policies\.fifo\.backfill: expected bool, got int 0"):
        _fifo(inputs, {"backfill": 0})
    knobs = parse_knobs({"policies": {"sia": {"queue_order": "lifo"}}}, "sim.toml")
    with pytest.raises(KnobsError, match=r"sim\.toml: policies\.sia\.queue_order: unknown 'lifo'"):
        simulate(None, **inputs, policies=["fifo"], knobs=knobs)  # a table of a policy not run


def test_worker_processes_get_the_settings_too(inputs: dict[str, Path]) -> None:
    def waits(table: dict[str, object]) -> list[float]:
        doc = {"profiling_s": 0, "policies": {"fifo": table}}
        out = simulate_seeds(
            None, seeds=[0, 1], **inputs, policies=["fifo"], knobs=parse_knobs(doc), workers=2
        )
        assert out["policy_settings"] == {"fifo": {"backfill": table.get("backfill", True)}}
        return [out["per_seed"][s]["fifo"]["avg_wait_h"] for s in ("0", "1")]

    easy, strict = waits({}), waits({"backfill": False})
    for seed in (0, 1):  # d waited behind c in each worker
        assert strict[seed] - easy[seed] == pytest.approx(324 / 3600 / 4, rel=0.02)
