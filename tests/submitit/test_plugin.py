"""The hops plugin for submitit without a cluster: registration, parameters, batch script."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import submitit
from submitit.core import plugins

from hops_submitit import HopsExecutor, HopsInfoWatcher, HopsJobEnvironment
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
            "tasks_per_node": 1,
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


def test_a_data_parallel_job_runs_one_srun_task_per_gpu(tmp_path: Path) -> None:
    params = {"job_name": "ddp", "time": 5, "stderr_to_stdout": True, "mem": None,
              "cpus_per_task": 2, "tasks_per_node": 2}  # fmt: skip
    lines = batch_script("python -m submitit.core._submit /f", tmp_path, params).splitlines()
    assert "export HOPS_SUBMITIT_DATA_PARALLEL=1" in lines
    assert "gres/gpu=" in lines[-2] and lines[-1] == (
        'exec srun --ntasks="${gpus}" --gpus-per-task=1 --cpus-per-task=2 '
        "python -m submitit.core._submit /f"
    )
    executor = HopsExecutor(tmp_path, hops="/bin/true")
    executor.update_parameters(tasks_per_node=2)  # accepted: one task per GPU
    with pytest.raises(ValueError, match="positive count"):
        executor.update_parameters(tasks_per_node=0)


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


class _Port:
    """Answers the two reads the watcher makes; counts them."""

    def __init__(self, queue: list[tuple[int, str]], accounting: list[tuple[int, str]]) -> None:
        self.queue, self.acct = queue, accounting
        self.calls: list[str] = []

    def list_jobs(self) -> list[SimpleNamespace]:
        self.calls.append("list_jobs")
        return [SimpleNamespace(job_id=i, state=s, nodes=("a100n1",)) for i, s in self.queue]

    def accounting(self, ids: list[int]) -> list[SimpleNamespace]:
        self.calls.append(f"accounting {ids}")
        return [SimpleNamespace(job_id=i, state=s, nodes=()) for i, s in self.acct if i in ids]


def test_watcher_reads_the_queue_then_accounting_for_jobs_gone() -> None:
    port = _Port([(7, "PENDING"), (8, "COMPLETED")], [(9, "FAILED"), (10, "COMPLETED")])
    watcher = HopsInfoWatcher(delay_s=60, port=lambda: port)  # type: ignore[arg-type,return-value]
    for job_id in ("7", "8", "9"):
        watcher.register_job(job_id)
    assert watcher.get_state("9", mode="force") == "FAILED"
    assert watcher.get_state("7", mode="cache") == "PENDING"
    assert watcher.get_state("8", mode="cache") == "COMPLETED"
    assert port.calls == ["list_jobs", "accounting [9]"]
    assert watcher.is_done("8", mode="cache") and not watcher.is_done("7", mode="cache")
    watcher.update()  # only the unfinished job is asked for again
    assert port.calls[-1] == "list_jobs" and len(port.calls) == 3
