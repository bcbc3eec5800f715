"""`hops simulate` through the CLI: a tiny cluster and trace, table and --json output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hops_cli.main import app
from hops_cli.simulate import stdout_to_stderr
from hopsd.sim.seeds import RATIO_METRICS

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
        assert {*RATIO_METRICS, "avg_idle_gpus", "utilization", "preemptions"} <= set(figures)
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


def test_simulate_json_stdout_of_a_real_run_is_one_document(tmp_path: Path) -> None:
    # The installed command in its own process: anything a solver prints from native
    # code to file descriptor 1 would land in stdout and break the JSON.
    hops = Path(sys.executable).with_name("hops")
    done = subprocess.run(
        [str(hops), "simulate", "--preset", "paper-64", "--policies", "hops,sia,gavel", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert set(payload["policies"]) == {"hops", "sia", "gavel"}


def test_native_prints_during_a_run_go_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with stdout_to_stderr():
        os.write(1, b"HighsMipSolverData::noise\n")
    print("result")
    captured = capfd.readouterr()
    assert "noise" in captured.err and "noise" not in captured.out
    assert captured.out == "result\n"


def test_knobs_from_flags_and_a_simulation_file_are_recorded(tmp_path: Path) -> None:
    cluster, trace = inputs(tmp_path)
    knobs = tmp_path / "sim.toml"
    knobs.write_text(
        "round_length_s = 120\nrestart_penalty_s = 10\n"
        "[policies.gavel]\nround_length_s = 360\nrestart_penalty_s = 0\n"
        "[policies.sia]\nround_length_s = 60\n"
    )
    out = tmp_path / "out"
    args = ["simulate", "--cluster", str(cluster), "--trace", str(trace)]
    result = runner.invoke(
        app,
        [
            *args,
            *("--policies", "hops,sia,gavel", "--sim-config", str(knobs)),
            *("--profiling-s", "30", "--restart-penalty", "20", "--out", str(out), "--json"),
        ],
    )
    assert result.exit_code == 0, result.output
    recorded = json.loads((out / "results.json").read_text())["knobs"]
    assert recorded == {
        "hops": {"round_length_s": 120.0, "restart_penalty_s": 20.0, "profiling_s": 30.0},
        "sia": {"round_length_s": 60.0, "restart_penalty_s": 20.0, "profiling_s": 30.0},
        "gavel": {"round_length_s": 360.0, "restart_penalty_s": 0.0, "profiling_s": 30.0},
    }
    bad = runner.invoke(app, [*args, "--policies", "fifo", "--round-length", "0"])
    assert bad.exit_code == 2 and "round_length_s must be > 0" in bad.stderr
    knobs.write_text("[policies.gavle]\nround_length_s = 360\n")
    typo = runner.invoke(app, [*args, "--policies", "fifo", "--sim-config", str(knobs)])
    assert typo.exit_code == 2 and "unknown policy 'gavle'" in typo.stderr


def test_several_seeds_give_intervals_and_paired_ratios(tmp_path: Path) -> None:
    cluster, trace = inputs(tmp_path)
    args = ["simulate", "--cluster", str(cluster), "--trace", str(trace), "--policies", "hops,fifo"]
    result = runner.invoke(app, [*args, "--seeds", "0-2", "--workers", "2", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["seeds"] == [0, 1, 2] and sorted(payload["per_seed"]) == ["0", "1", "2"]
    jct = payload["summary"]["hops"]["avg_jct_h"]
    values = [payload["per_seed"][s]["hops"]["avg_jct_h"] for s in ("0", "1", "2")]
    assert jct["n"] == 3 and jct["mean"] == pytest.approx(sum(values) / 3)
    assert jct["ci_low"] <= jct["mean"] <= jct["ci_high"]
    ratio = payload["paired_ratio"]["fifo"]["avg_jct_h"]
    per_seed = [
        payload["per_seed"][s]["hops"]["avg_jct_h"] / payload["per_seed"][s]["fifo"]["avg_jct_h"]
        for s in ("0", "1", "2")
    ]
    assert ratio["mean"] == pytest.approx(sum(per_seed) / 3)
    table = runner.invoke(app, [*args, "--seeds", "0,1"])
    assert table.exit_code == 0 and "95% CI" in table.stdout and "hops / baseline" in table.stdout


def test_simulate_reads_a_gavel_trace(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        "[gpu_types.v100]\nspeed = 2.0\n[gpu_types.k80]\nspeed = 1.0\n"
        '[[node_groups]]\nprefix = "v"\ncount = 1\ngpu_type = "v100"\ngpus = 4\n'
        '[[node_groups]]\nprefix = "k"\ncount = 1\ngpu_type = "k80"\ngpus = 4\n'
    )
    trace = tmp_path / "jobs.trace"
    trace.write_text(
        "ResNet-18 (batch size 64)\tpython3 m.py\td\t--n\t1\t4000\t2\t1\t-1\t0\n"
        "A3C\tpython3 m.py\td\t--n\t0\t900\t1\t1\t-1\t30\n"
    )
    thr = tmp_path / "throughputs.json"
    thr.write_text(
        json.dumps(
            {
                worker: {
                    "('ResNet-18 (batch size 64)', 1)": {"null": 9.0 * speed},
                    "('ResNet-18 (batch size 64)', 2)": {"null": 16.0 * speed},
                    "('A3C', 1)": {"null": 3.0 * speed},
                }
                for worker, speed in (("v100", 2.0), ("k80", 1.0))
            }
        )
    )
    args = ["simulate", "--cluster", str(cluster), "--trace", str(trace), "--profiles", str(thr)]
    result = runner.invoke(app, [*args, "--trace-format", "gavel", "--policies", "gavel", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_jobs"] == 2 and payload["trace_format"] == "gavel"
    wrong = runner.invoke(app, [*args, "--trace-format", "pollux", "--policies", "gavel"])
    assert wrong.exit_code == 2 and "unknown trace format" in wrong.stderr
    # a Gavel trace read as a Sia workload is refused with what Sia's CSV needs
    wrong = runner.invoke(app, [*args, "--trace-format", "sia", "--policies", "gavel"])
    assert wrong.exit_code == 2 and "a Sia workload needs the columns" in wrong.stderr


def test_simulate_reads_a_sia_workload() -> None:
    sia = Path(__file__).resolve().parents[1] / "fixtures" / "sia"
    result = runner.invoke(
        app,
        [
            "simulate",
            "--cluster",
            str(sia / "cluster.toml"),
            "--trace",
            str(sia / "workload.csv"),
            "--trace-format",
            "sia",
            "--profiles",
            str(sia / "traces"),
            "--policies",
            "sia,fifo",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_jobs"] == 4 and payload["trace_format"] == "sia"
    assert set(payload["policies"]) == {"sia", "fifo"}
