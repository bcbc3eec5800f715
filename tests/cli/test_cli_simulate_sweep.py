"""`hops simulate` as a sweep: several workloads, a results directory, the executors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hops_cli.main import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
SMALL = ["--cluster", str(REPO / "examples/sim/cluster.toml")]
SMALL += ["--trace", str(REPO / "examples/sim/trace.csv")]


def test_two_workloads_one_results_object_each(tmp_path: Path) -> None:
    sim = tmp_path / "sweep.toml"
    sim.write_text(
        "[workloads.again]\n"
        f'cluster = "{REPO / "examples/sim/cluster.toml"}"\n'
        f'trace = "{REPO / "examples/sim/trace.csv"}"\n'
    )
    results = tmp_path / "r"
    argv = ["simulate", *SMALL, "--sim-config", str(sim), "--policies", "hops,fifo"]
    argv += ["--seeds", "0-1", "--results", str(results), "--json"]
    done = runner.invoke(app, argv)
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert [w["workload"] for w in payload["workloads"]] == ["trace", "again"]
    first, second = payload["workloads"]
    assert first["summary"] == second["summary"]  # the same files, the same figures
    assert len(list((results / "cells").rglob("*.json"))) == 8
    assert json.loads((results / "results.json").read_text()) == payload

    table = runner.invoke(app, argv[:-1])
    assert table.exit_code == 0, table.output
    assert "8 cells (8 already done, 0 computed)" in table.stdout
    assert "again: mean [95% CI] over seeds 0..1" in table.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--executor", "slurm"], "--executor slurm needs --results DIR"),
        (["--results", "r", "--out", "o"], "a sweep writes its results into --results"),
        (["--executor", "cloud", "--results", "r"], "unknown executor 'cloud'"),
        (["--executor", "slurm", "--results", "r", "--time-limit", "0"], "--time-limit"),
        (["--executor", "slurm", "--results", "r", "--cells-per-task", "0"], "--cells-per-task"),
        (["--executor", "slurm", "--results", "r", "--mem-gb", "0"], "--mem-gb must be > 0"),
    ],
)
def test_sweep_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["simulate", *SMALL, "--policies", "fifo", *extra])
    assert done.exit_code == 2
    assert message in done.output


def test_slurm_executor_without_slurm_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, srun or sinfo
    argv = ["simulate", *SMALL, "--policies", "fifo", "--results", str(tmp_path / "r")]
    done = runner.invoke(app, [*argv, "--executor", "slurm"])
    assert done.exit_code == 2
    assert "no Slurm here (sbatch is not on PATH)" in done.output
    assert not (tmp_path / "r" / "cells").exists()


def test_the_example_sweep_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # its paths are the file's, wherever hops runs
    argv = ["simulate", "--sim-config", str(REPO / "examples/sim/sweep.toml")]
    done = runner.invoke(app, [*argv, "--policies", "fifo", "--results", "r", "--json"])
    assert done.exit_code == 0, done.output
    runs = json.loads(done.stdout)["workloads"]
    assert [(w["workload"], w["knobs"]["fifo"]["round_length_s"]) for w in runs] == [
        ("small", 360.0),
        ("paper-64", 360.0),
    ]
