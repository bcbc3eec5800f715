"""`hops simulate` through the CLI: a tiny cluster and trace, table and --json output."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from hops_cli.main import app

runner = CliRunner()

CLUSTER = """
[gpu_types.TitanXP]
speed = 1.0
[gpu_types.RTX3090]
speed = 2.5

[[node_groups]]
prefix = "s"
count = 2
gpu_type = "TitanXP"
gpus = 4

[[node_groups]]
prefix = "f"
count = 1
gpu_type = "RTX3090"
gpus = 4
"""

TRACE = """submit_time_s,demands,total_samples,model
0,1|2,20000,resnet18
60,2|4,40000,resnet50
120,1,5000,mobilenetv2
"""


def inputs(tmp_path: Path) -> tuple[Path, Path]:
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(CLUSTER)
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    return cluster, trace


def test_simulate_json_has_every_metric_per_policy(tmp_path: Path) -> None:
    cluster, trace = inputs(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "simulate",
            "--cluster",
            str(cluster),
            "--trace",
            str(trace),
            "--policies",
            "hops,fifo",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload["policies"]) == {"hops", "fifo"}
    for figures in payload["policies"].values():
        assert {
            "makespan_h",
            "avg_jct_h",
            "p99_jct_h",
            "avg_wait_h",
            "max_lr",
            "p99_lr",
            "max_ftf",
            "avg_idle_gpus",
            "utilization",
            "preemptions",
        } <= set(figures)
        assert figures["makespan_h"] > 0
    assert json.loads((out / "results.json").read_text())["n_jobs"] == 3
    assert any(p.suffix == ".png" for p in out.iterdir())


def test_simulate_table_output(tmp_path: Path) -> None:
    cluster, trace = inputs(tmp_path)
    result = runner.invoke(
        app, ["simulate", "--cluster", str(cluster), "--trace", str(trace), "--policies", "fifo"]
    )
    assert result.exit_code == 0, result.output
    assert "fifo" in result.stdout and "avg JCT" in result.stdout


def test_simulate_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    cluster, trace = inputs(tmp_path)
    trace.write_text("submit_time_s,demands,total_samples,model\n0,one,100,resnet18\n")
    result = runner.invoke(
        app, ["simulate", "--cluster", str(cluster), "--trace", str(trace), "--policies", "fifo"]
    )
    assert result.exit_code == 2 and "line 2" in result.stderr and "Traceback" not in result.output
    unknown = runner.invoke(app, ["simulate", "--policies", "slurm-magic"])
    assert unknown.exit_code == 2 and "unknown policy" in unknown.stderr
    alone = runner.invoke(app, ["simulate", "--cluster", str(cluster)])
    assert alone.exit_code == 2 and "go together" in alone.stderr
