"""The hops plugin for submitit without a cluster: registration, parameters, batch script."""

from __future__ import annotations

from pathlib import Path

import pytest
import submitit
from submitit.core import plugins

from hops_submitit import HopsExecutor, HopsJobEnvironment
from hops_submitit.executor import batch_script, demand_text, submit_argv


def test_submitit_finds_the_plugin_through_its_entry_points() -> None:
    assert plugins.get_executors()["hops"] is HopsExecutor
    assert isinstance(plugins.get_job_environments()["hops"], HopsJobEnvironment)
    # Never chosen over Slurm's own executor unless asked for.
    assert HopsExecutor.affinity() == 0


def test_auto_executor_maps_generic_and_hops_parameters(tmp_path: Path) -> None:
    executor = submitit.AutoExecutor(folder=tmp_path / "%j", cluster="hops", hops_hops="/bin/true")
    executor.update_parameters(
        name="train", timeout_min=30, mem_gb=1.5, gpus_per_node=2, hops_samples=5000
    )
    params = executor._executor.parameters
    assert (params["job_name"], params["time"], params["mem"]) == ("train", 30, "1536M")
    assert params["gpus"] == 2 and params["samples"] == 5000
    executor.update_parameters(hops_gpus=[1, 2, 4], hops_batch_size=64)
    (tmp_path / "job.sh").write_text("#!/bin/sh\n")
    argv = executor._executor._make_submission_command(tmp_path / "job.sh")
    assert argv[:5] == ["/bin/true", "submit", str(tmp_path / "job.sh"), "--gpus", "1,2,4"]
    assert argv[argv.index("--samples") + 1] == "5000" and "--parsable" in argv
    assert argv[argv.index("--batch-size") + 1] == "64"
    assert (tmp_path / "job.sh").stat().st_mode & 0o100  # hops submit wants it executable


def test_bad_parameters_are_refused_at_update(tmp_path: Path) -> None:
    executor = HopsExecutor(tmp_path, hops="/bin/true")
    with pytest.raises(ValueError, match="hopsd chooses nodes"):
        executor.update_parameters(nodes=2)
    with pytest.raises(ValueError, match="unknown hops parameters"):
        executor.update_parameters(partition="a100")
    with pytest.raises(ValueError, match="demand set"):
        executor.update_parameters(gpus="")
    with pytest.raises(ValueError, match="samples"):
        submit_argv("hops", "job.sh", {**executor.parameters, "samples": None})


def test_batch_script_runs_the_job_as_the_batch_process(tmp_path: Path) -> None:
    text = batch_script(
        "python -u -m submitit.core._submit /f",
        tmp_path / "%j",
        {
            "job_name": "a b",
            "time": 7,
            "stderr_to_stdout": False,
            "mem": "2G",
            "cpus_per_task": 3,
        },
    )
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --job-name='a b'" in lines and "#SBATCH --time=7" in lines
    assert f"#SBATCH --output={tmp_path}/%j/%j_0_log.out" in lines
    assert "#SBATCH --open-mode=append" in lines and "#SBATCH --mem=2G" in lines
    # exec: the notice, sent to the batch script, reaches the Python process itself.
    assert lines[-2:] == [
        "export SUBMITIT_EXECUTOR=hops",
        "exec python -u -m submitit.core._submit /f",
    ]


def test_demand_sets() -> None:
    assert [demand_text(g) for g in (2, (1, 2), [4, 8], " 2-8 ")] == ["2", "1,2", "4,8", "2-8"]
    for bad in (True, None, ""):
        with pytest.raises(ValueError):
            demand_text(bad)


def test_job_environment_reads_slurms_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    env = HopsJobEnvironment()
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    assert not env.activated()
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "hops")
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert env.activated() and env.job_id == "41" and env.global_rank == 0
    assert HopsJobEnvironment.USR_SIG == "USR1"
