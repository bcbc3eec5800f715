"""benchmarks/dominance.py on a tiny Sia-format family run by the real sweep: the JSON's
shape, and every ratio and interval equal to what the cell files give by hand."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIA = ROOT / "tests" / "fixtures" / "sia"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dominance", ROOT / "benchmarks" / "dominance.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


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
