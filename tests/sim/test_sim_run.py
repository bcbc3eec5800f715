"""simulate(): the results object and the files written to out_dir."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sim_helpers import cluster_toml, tiny_jobs

from hopsd.core.errors import InvalidInputError
from hopsd.sim.run import simulate
from hopsd.sim.seeds import RATIO_METRICS
from hopsd.sim.trace import write_trace

LINKS = {"b_link": 4e9, "b_net": 1e9}
CLUSTER = cluster_toml({"fast": LINKS, "slow": LINKS}, ("f", 1, "fast", 4), ("s", 2, "slow", 4))

PROFILES = """
[models.toy]
params = 1e3
batch_size = 10
throughput = { fast = 20.0, slow = 10.0 }
[models.other]
params = 1e3
batch_size = 10
compute_ms = { fast = 250.0, slow = 1000.0 }
"""

#: a policy's figures: those a multi-seed run reports ratios of, and the others
KEYS = {*RATIO_METRICS, "avg_idle_gpus", "avg_usable_idle_gpus", "utilization", "preemptions"}


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    cluster, profiles, trace = tmp_path / "c.toml", tmp_path / "m.toml", tmp_path / "t.csv"
    cluster.write_text(CLUSTER, encoding="utf-8")
    profiles.write_text(PROFILES, encoding="utf-8")
    write_trace(trace, tiny_jobs())
    return cluster, profiles, trace


def test_simulate_files_and_results(tmp_path: Path, files: tuple[Path, Path, Path]) -> None:
    cluster, profiles, trace = files
    seen: list[str] = []
    out = simulate(
        None,
        cluster=cluster,
        trace=trace,
        profiles=profiles,
        policies=["fifo", "hops"],
        seed=1,
        out_dir=tmp_path / "out",
        progress_callback=lambda name, now, done, total: seen.append(name),
    )
    assert set(out["policies"]) == {"fifo", "hops"}
    for figures in out["policies"].values():
        assert set(figures) == KEYS
        assert figures["avg_jct_h"] >= figures["avg_wait_h"] > 0
    assert out["seed"] == 1 and out["n_jobs"] == 6 and out["total_gpus"] == 12
    assert set(seen) == {"fifo", "hops"}
    folder = tmp_path / "out"
    assert json.loads((folder / "results.json").read_text())["policies"] == out["policies"]
    rows = list(csv.DictReader((folder / "jobs_hops.csv").open()))
    assert len(rows) == 6 and float(rows[0]["jct_s"]) > 0
    for png in ("jct_cdf.png", "latency_ratio_cdf.png", "throughput.png"):
        assert (folder / png).read_bytes()[:4] == b"\x89PNG"
    # The workload written out replays to the same figures.
    again = simulate(
        None,
        cluster=cluster,
        trace=folder / "trace.csv",
        profiles=profiles,
        policies=["fifo"],
        seed=1,
    )
    assert again["policies"]["fifo"] == out["policies"]["fifo"]


def test_simulate_refuses_bad_requests(files: tuple[Path, Path, Path]) -> None:
    cluster, _profiles, _trace = files
    with pytest.raises(InvalidInputError, match="unknown policy 'nope'"):
        simulate("paper-64", policies=["nope"])
    with pytest.raises(InvalidInputError, match="unknown preset 'paper-1'"):
        simulate("paper-1", policies=["fifo"])
    with pytest.raises(InvalidInputError, match="trace"):
        simulate(None, cluster=cluster, policies=["fifo"])


def test_parallel_workers_give_the_same_figures(files: tuple[Path, Path, Path]) -> None:
    cluster, profiles, trace = files
    kwargs = {"cluster": cluster, "trace": trace, "profiles": profiles, "seed": 3}
    names = ["fifo", "gavel", "hops"]
    one = simulate(None, policies=names, **kwargs)  # type: ignore[arg-type]
    seen: list[str] = []
    two = simulate(
        None,
        policies=names,
        workers=2,
        progress_callback=lambda name, *_: seen.append(name),
        **kwargs,  # type: ignore[arg-type]
    )
    assert list(two["policies"]) == names
    assert two["policies"] == one["policies"]
    assert seen == names
    with pytest.raises(InvalidInputError, match="workers"):
        simulate(None, policies=names, workers=0, **kwargs)  # type: ignore[arg-type]
