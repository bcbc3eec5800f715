"""A sweep as a Slurm job array on the live test cluster gives the local run's results.

2 policies x 2 seeds of a 4-job trace: the cells computed by the array's tasks
(submitit, ``srun`` on the test cluster's nodes) must equal the cells computed
here in processes, figure by figure and simulated job by job (only the
planning wall time differs), and merge into the same tables. A second run
submits nothing: every cell is there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
from daemon_live import LIVE
from sweep_cells import cell_docs

from hopsd.sim.sweep import SweepError, make_workload, write_atomic
from hopsd.sim.sweep_run import run_sweep
from hopsd.sweep_slurm import LOGS, SlurmArray, SlurmOptions

pytestmark = LIVE

REPO = Path(__file__).resolve().parents[2]


def final_states(array: str, tasks: int, deadline_s: float = 60.0) -> list[str]:
    """``TASK|STATE`` of the array's tasks once accounting shows them all ended (a task's
    cell and result are written a moment before its step and batch script exit, and
    slurmdbd records the array's tasks a moment after that)."""
    end = time.monotonic() + deadline_s
    while True:
        states = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", array, "-o", "JobID,State"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.split()
        ended = not any(s.endswith(("|RUNNING", "|PENDING", "|COMPLETING")) for s in states)
        if (ended and len(states) == tasks) or time.monotonic() > end:
            return states
        time.sleep(1.0)


def test_job_array_sweep_matches_the_local_run(tmp_path: Path) -> None:
    workload = make_workload(
        "small", cluster=REPO / "examples/sim/cluster.toml", trace=REPO / "examples/sim/trace.csv"
    )
    args: dict[str, Any] = {"seeds": [0, 1], "policies": ["hops", "fifo"]}
    local = run_sweep([workload], results=tmp_path / "local", workers=2, **args)
    options = SlurmOptions(time_limit_min=5, array_parallelism=4, poll_s=0.5)
    remote = run_sweep([workload], results=tmp_path / "slurm", remote=SlurmArray(options), **args)

    assert remote.computed == 4 and remote.notes[0].endswith(": 4 tasks")
    array = remote.notes[0].split()[2].rstrip(":")
    states = final_states(array, 4)
    assert len(states) == 4 and all(s.endswith("|COMPLETED") for s in states), states
    assert len(list((tmp_path / "slurm" / LOGS).glob(f"{array}_*/*_log.out"))) == 4

    local_cells, remote_cells = cell_docs(tmp_path / "local"), cell_docs(tmp_path / "slurm")
    assert len(local_cells) == 4 and local_cells == remote_cells
    assert local.merged[0]["summary"] == remote.merged[0]["summary"]
    assert local.merged[0]["paired_ratio"] == remote.merged[0]["paired_ratio"]

    again = run_sweep([workload], results=tmp_path / "slurm", remote=SlurmArray(options), **args)
    assert (again.skipped, again.computed, again.notes) == (4, 0, [])


def test_a_failed_task_is_named_and_the_rerun_computes_only_it(tmp_path: Path) -> None:
    workload = make_workload(
        "small", cluster=REPO / "examples/sim/cluster.toml", trace=REPO / "examples/sim/trace.csv"
    )
    args: dict[str, Any] = {"seeds": [0, 1], "policies": ["fifo"]}
    options = SlurmOptions(time_limit_min=5, array_parallelism=4, poll_s=0.5)
    blocked = tmp_path / "cells/small/fifo/seed-1.json"
    blocked.mkdir(parents=True)  # the task cannot put its file where a directory is
    with pytest.raises(SweepError) as failed:
        run_sweep([workload], results=tmp_path, remote=SlurmArray(options), **args)
    message = str(failed.value)
    assert "1 of 2 cells failed (small/fifo/seed 1)" in message, message
    assert "IsADirectoryError" in message and "_log.err" in message, message
    assert (tmp_path / "cells/small/fifo/seed-0.json").is_file()

    blocked.rmdir()
    again = run_sweep([workload], results=tmp_path, remote=SlurmArray(options), **args)
    assert (again.skipped, again.computed) == (1, 1)


def test_tasks_cancelled_before_a_result_are_reported_not_awaited(tmp_path: Path) -> None:
    workload = make_workload(
        "small", cluster=REPO / "examples/sim/cluster.toml", trace=REPO / "examples/sim/trace.csv"
    )
    options = SlurmOptions(time_limit_min=5, array_parallelism=1, poll_s=0.5)
    cancelled: list[str] = []

    def cancel_at_first_report(done: int, total: int, what: str) -> None:
        if what.startswith("job array") and not cancelled:  # submitted; at most one started
            cancelled.append(what.split()[2].rstrip(":"))
            subprocess.run(["scancel", cancelled[0]], check=True, timeout=30)

    with pytest.raises(SweepError) as failed:
        run_sweep(
            [workload],
            seeds=[0, 1, 2],
            policies=["fifo"],
            results=tmp_path,
            remote=SlurmArray(options),
            progress=cancel_at_first_report,
        )
    message = str(failed.value)
    assert f"job array {cancelled[0]}: 3 of 3 cells failed" in message, message
    assert "left Slurm's queue without a result" in message, message


def test_the_commands_json_is_the_same_from_an_array_of_grouped_cells(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from hops_cli.main import app

    argv = ["simulate", "--cluster", str(REPO / "examples/sim/cluster.toml")]
    argv += ["--trace", str(REPO / "examples/sim/trace.csv"), "--policies", "hops,fifo"]
    argv += ["--seeds", "0-1", "--json"]
    runner = CliRunner()
    local = runner.invoke(app, [*argv, "--results", str(tmp_path / "l"), "--workers", "2"])
    slurm = ["--executor", "slurm", "--time-limit", "5", "--cells-per-task", "3"]
    remote = runner.invoke(app, [*argv, "--results", str(tmp_path / "s"), *slurm])
    assert local.exit_code == 0 and remote.exit_code == 0, local.output + remote.output
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    for doc in (a, b):
        for figures in doc["per_seed"].values():
            for policy in figures.values():
                policy.pop("wall_s")
    assert a == b and a["seeds"] == [0, 1]
    assert len(list((tmp_path / "s" / LOGS).glob("*_*/*_log.out"))) == 2  # 4 cells: 3 + 1


def test_no_second_array_while_the_directorys_last_one_is_queued(tmp_path: Path) -> None:
    workload = make_workload(
        "small", cluster=REPO / "examples/sim/cluster.toml", trace=REPO / "examples/sim/trace.csv"
    )
    running = subprocess.run(  # stands for an array a sweep was interrupted waiting for
        ["sbatch", "--parsable", "--array=0-1", "-t", "2", "-o", "/dev/null", "--wrap", "sleep 60"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    try:
        write_atomic(tmp_path / LOGS / "array.json", {"array": running})
        args: dict[str, Any] = {"seeds": [0], "policies": ["fifo"], "results": tmp_path}
        with pytest.raises(SweepError, match=f"job array {running} of .* still has 2 tasks"):
            run_sweep([workload], remote=SlurmArray(SlurmOptions(time_limit_min=5)), **args)
        assert not (tmp_path / "cells").exists()
    finally:
        subprocess.run(["scancel", running], check=True, timeout=30)
