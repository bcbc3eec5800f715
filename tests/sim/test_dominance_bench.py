"""benchmarks/dominance.py on a tiny Sia-format family run by the real sweep: the JSON's
shape, and every ratio and interval equal to what the cell files give by hand."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from by_path import load_by_path

ROOT = Path(__file__).resolve().parents[2]
SIA = ROOT / "tests" / "fixtures" / "sia"


def _bench() -> ModuleType:
    return load_by_path("dominance", ROOT / "benchmarks" / "dominance.py")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _bench()


def _sia_dir(tmp: Path) -> Path:
    """Sia's layout: two saturn workloads (the fixture's, and its jobs arriving earlier and
    closer together, so the pairs' ratios differ) and its traces."""
    root = tmp / "sia"
    (root / "workloads" / "saturn").mkdir(parents=True)
    shutil.copytree(SIA / "traces", root / "traces")
    lines = (SIA / "workload.csv").read_text(encoding="utf-8").splitlines()
    (root / "workloads" / "saturn" / "workload-1.csv").write_text("\n".join(lines) + "\n")
    squeezed = [lines[0]]
    for line in lines[1:]:
        fields = line.split(",")
        fields[1] = str(int(fields[1]) // 3)
        squeezed.append(",".join(fields))
    (root / "workloads" / "saturn" / "workload-2.csv").write_text("\n".join(squeezed) + "\n")
    return root


def _cell(results: Path, workload: str, policy: str, seed: int) -> dict[str, float]:
    path = results / "sia-saturn" / "cells" / workload / policy / f"seed-{seed}.json"
    return dict(json.loads(path.read_text(encoding="utf-8"))["figures"])


def test_ratios_equal_the_cells_by_hand(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scipy.stats import t

    sia, results = _sia_dir(tmp_path), tmp_path / "results"
    argv = ["--json", "--families", "sia-saturn,sia-philly", "--seeds", "0-1"]
    argv += ["--sia-dir", str(sia), "--sia-cluster", str(SIA / "cluster.toml")]
    argv += ["--results", str(results)]
    report = bench.main(argv)
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(report))
    fam = report["families"]["sia-saturn"]
    assert fam["workloads"] == ["sia-saturn-workload-1", "sia-saturn-workload-2"]
    assert fam["missing"] is None and fam["cells"] == {"total": 16, "computed": 16}
    assert "Sia's published philly workloads" in report["families"]["sia-philly"]["missing"]
    assert "ratios" not in report["families"]["sia-philly"]
    assert set(fam["ratios"]) == {"sia", "gavel", "fifo"}
    for base, metrics in fam["ratios"].items():
        assert set(metrics) == set(bench.GOALS)
        for metric, r in metrics.items():
            pairs = [
                (_cell(results, w, "hops", s)[metric], _cell(results, w, base, s)[metric])
                for w in fam["workloads"]
                for s in (0, 1)
            ]
            ratios = [a / b if b > 0 else 1.0 for a, b in pairs if b > 0 or a == 0]
            assert r["n"] == 4 and r["undefined"] == 4 - len(ratios)
            if r["scale"] == "log":
                logs = [math.log(x) for x in ratios]
                mean = sum(logs) / 4
                sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
                half = t.ppf(0.975, 3) * sd / 2
                assert r["ratio"] == pytest.approx(math.exp(mean), rel=1e-12)
                assert r["ci_low"] == pytest.approx(math.exp(mean - half), rel=1e-9)
                assert r["ci_high"] == pytest.approx(math.exp(mean + half), rel=1e-9)
            else:  # a ratio of 0 (hops 0, the baseline not): the ratios' own mean
                assert min(ratios) == 0 and r["ratio"] == pytest.approx(sum(ratios) / 4)
            assert r["meets"] == (r["ci_high"] <= bench.GOALS[metric] and r["undefined"] == 0)
    spread = fam["ratios"]["sia"]["avg_jct_h"]
    assert spread["ci_low"] < spread["ratio"] < spread["ci_high"], spread  # the pairs do differ

    again = bench.main(argv)  # every cell is there: nothing recomputed, same figures
    capsys.readouterr()
    assert again["families"]["sia-saturn"]["cells"]["computed"] == 0
    assert again["families"]["sia-saturn"]["ratios"] == fam["ratios"]


def test_pair_edge_cases(bench: ModuleType) -> None:
    both_zero = bench.ratio_interval([(0.0, 0.0), (0.0, 0.0)], 1.0)
    assert both_zero["ratio"] == 1.0 and both_zero["meets"]
    undefined = bench.ratio_interval([(1.0, 0.0), (1.0, 2.0)], 1.0)
    assert undefined["undefined"] == 1 and undefined["ratio"] == 0.5 and not undefined["meets"]
    one = bench.ratio_interval([(1.1, 1.0)], 1.03)
    assert one["ci_low"] == one["ci_high"] == pytest.approx(1.1) and not one["meets"]


def test_sia_family_takes_the_first_workloads_by_number_on_sias_cluster(
    bench: ModuleType, tmp_path: Path
) -> None:
    """``workload-10`` sorts after ``workload-9`` (not after ``workload-1``), ``--sia-workloads``
    keeps the first N, and without a cluster file in the directory the family runs on the
    repository's file of Sia's 64-GPU cluster."""
    root = tmp_path / "sia"
    (root / "workloads" / "saturn").mkdir(parents=True)
    shutil.copytree(SIA / "traces", root / "traces")
    for n in (1, 2, 10, 9):
        shutil.copy(SIA / "workload.csv", root / "workloads" / "saturn" / f"workload-{n}.csv")
    every = bench.sia_family("sia-saturn", root, None, [0], None)
    names = [w.name for w in every.workloads]
    assert names == [f"sia-saturn-workload-{n}" for n in (1, 2, 9, 10)]
    first = bench.sia_family("sia-saturn", root, None, [0], 3)
    assert [w.name for w in first.workloads] == names[:3]
    assert {w.cluster for w in first.workloads} == {str(bench.SIA_CLUSTER)}
    assert not first.missing


def test_sias_cluster_file_is_sias_64_gpus() -> None:
    """The facts the file states: 6 aws servers of 4 GPUs, 2 dgx-ext and 3 rtx of 8."""
    from hopsd.sim.cluster_file import load_cluster

    cluster = load_cluster(ROOT / "examples" / "sim" / "sia-cluster.toml").cluster
    per_type = {t: sorted(n.gpus for n in cluster.nodes_of_type(t)) for t in cluster.gpu_types}
    assert per_type == {"aws": [4] * 6, "dgx-ext": [8] * 2, "rtx": [8] * 3}
