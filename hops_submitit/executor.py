"""The executor and job of the hops plugin for submitit.

``HopsExecutor`` writes submitit's usual pickles and a batch script, then runs
``hops submit`` on it: hops's own validation, its tag (demand set, size, batch
size, model) and the configured Slurm backend, held for hopsd to place. The
submitted Python is the batch script's own process (``exec``), so hops's
checkpoint notice, sent to the batch script, reaches submitit's handler.

Parameters (``update_parameters`` or ``AutoExecutor(..., hops_<name>=...)``):
``gpus`` the demand set ("1,2,4", a range "2-8", or a count; submitit's
``gpus_per_node`` gives a single count), ``samples`` the job's size in samples
(``hops submit --samples``), ``batch_size``, ``model``, ``params``, ``lr``,
``lr_scale``, ``types`` and ``exclude_types`` (``hops submit --types``), and
for Slurm ``job_name``, ``time`` (minutes; ``timeout_min``),
``mem`` (``mem_gb``), ``cpus_per_task``, ``stderr_to_stdout`` and
``sbatch_args`` (more sbatch options). hopsd chooses nodes and GPU type.

``tasks_per_node`` above 1 makes the job data-parallel: ``srun`` starts one
task per GPU hops placed the run on (on one node or several, so as many
tasks as GPUs rather than a fixed count per node), each with submitit's
``global_rank``. hops's notice reaches every task; the function checkpoints
through its probe (``hops_probe.pytorch.stop_for_notice``: the ranks agree
on the step), so submitit's own checkpoint-and-requeue stays out of the way.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from submitit.core import core, utils

from hops_submitit.port import configured_port
from hops_submitit.watcher import HopsInfoWatcher
from hopsd.slurm.errors import SlurmError

#: Set in a data-parallel job (``tasks_per_node`` > 1), whatever its GPU count this run.
DATA_PARALLEL_ENV = "HOPS_SUBMITIT_DATA_PARALLEL"

DEFAULTS: dict[str, Any] = {
    "gpus": "1",
    "samples": None,
    "batch_size": 32,
    "model": "unknown",
    "params": 25e6,
    "lr": None,
    "lr_scale": "none",
    "job_name": "submitit",
    "time": 5,
    "mem": None,
    "cpus_per_task": None,
    "stderr_to_stdout": False,
    "sbatch_args": (),
    "types": "",
    "exclude_types": "",
    "nodes": 1,
    "tasks_per_node": 1,
}


class HopsJob(core.Job[core.R]):
    """A submitit job submitted through hops; states come through hops's Slurm port."""

    watcher = HopsInfoWatcher(delay_s=60)

    def cancel(self, check: bool = True) -> None:
        """Cancel through the configured port (as the caller, like ``hops cancel``)."""
        try:
            configured_port().cancel(int(self.job_id))
        except SlurmError:
            if check:
                raise


class HopsExecutor(core.PicklingExecutor):
    """submitit's executor for ``cluster="hops"``."""

    job_class = HopsJob

    def __init__(
        self,
        folder: str | Path,
        max_num_timeout: int = 3,
        max_pickle_size_gb: float = 1.0,
        python: str | None = None,
        hops: str | None = None,
    ) -> None:
        super().__init__(
            folder, max_num_timeout=max_num_timeout, max_pickle_size_gb=max_pickle_size_gb
        )
        self.python = shlex.quote(sys.executable) if python is None else python
        self.hops = hops or hops_command()
        self.parameters = dict(DEFAULTS)

    @classmethod
    def affinity(cls) -> int:
        """0: used when asked for (``cluster="hops"``), never chosen over Slurm's own."""
        return 0

    @classmethod
    def _equivalence_dict(cls) -> core.EquivalenceDict:
        return {
            "name": "job_name",
            "timeout_min": "time",
            "mem_gb": "mem",
            "nodes": "nodes",
            "cpus_per_task": "cpus_per_task",
            "gpus_per_node": "gpus",
            "tasks_per_node": "tasks_per_node",
        }

    @classmethod
    def _valid_parameters(cls) -> set[str]:
        return set(DEFAULTS)

    def _convert_parameters(self, params: dict[str, Any]) -> dict[str, Any]:
        params = super()._convert_parameters(params)
        if "mem" in params and params["mem"] is not None:
            params["mem"] = f"{max(1, int(float(params['mem']) * 1024))}M"
        return params

    def _internal_update_parameters(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"unknown hops parameters {unknown}; known: {sorted(DEFAULTS)}")
        if "nodes" in kwargs and kwargs["nodes"] != 1:
            raise ValueError("nodes: hopsd chooses nodes (and how many GPUs each run gets)")
        tasks = kwargs.get("tasks_per_node", 1)
        if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
            raise ValueError(f"tasks_per_node: a positive count, got {tasks!r}")
        merged = {**self.parameters, **kwargs}
        if merged["samples"] is None:  # may still come in a later update
            merged["samples"] = 1
        submit_argv("hops", "job.sh", merged)  # refuse bad values now, not at submit
        super()._internal_update_parameters(**kwargs)

    @property
    def _submitit_command_str(self) -> str:
        return f"{self.python} -u -m submitit.core._submit {shlex.quote(str(self.folder))}"

    def _num_tasks(self) -> int:
        """Result files submitit waits for: rank 0's is the job's result."""
        return 1

    def _make_submission_file_text(self, command: str, uid: str) -> str:
        return batch_script(command, self.folder, self.parameters)

    def _make_submission_command(self, submission_file_path: Path) -> list[str]:
        # hops submit wants an executable script, as a user's own would be.
        submission_file_path.chmod(submission_file_path.stat().st_mode | 0o100)
        return submit_argv(self.hops, str(submission_file_path), self.parameters)

    @staticmethod
    def _get_job_id_from_submission_command(string: bytes | str) -> str:
        """``hops submit --parsable`` prints the job id alone."""
        text = string.decode() if isinstance(string, bytes) else string
        lines = text.strip().splitlines()
        if not lines or not lines[-1].strip().isdigit():
            raise utils.FailedSubmissionError(f"hops submit printed no job id: {text!r}")
        return lines[-1].strip()


def hops_command() -> str:
    """The ``hops`` beside this Python (its virtual environment), else the one on PATH."""
    local = Path(sys.executable).with_name("hops")
    if local.exists():
        return str(local)
    found = shutil.which("hops")
    if found is None:
        raise RuntimeError("the hops command is not installed beside this Python nor on PATH")
    return found


def batch_script(command: str, folder: Path, params: dict[str, Any]) -> str:
    """The batch script: submitit's logs, the Slurm options, and the job as the script's process.

    ``exec`` makes the submitted Python the batch step's own process, so hops's
    checkpoint notice (a signal to the batch script) reaches submitit's handler.
    """
    paths = utils.JobPaths(folder=folder)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={shlex.quote(str(params['job_name']))}",
        f"#SBATCH --output={shlex.quote(str(paths.stdout).replace('%t', '0'))}",
        "#SBATCH --open-mode=append",
        f"#SBATCH --time={int(params['time'])}",
    ]
    if not params["stderr_to_stdout"]:
        lines.append(f"#SBATCH --error={shlex.quote(str(paths.stderr).replace('%t', '0'))}")
    if params["mem"]:
        lines.append(f"#SBATCH --mem={params['mem']}")
    if params["cpus_per_task"] and int(params["tasks_per_node"]) > 1:
        # one task per GPU: CPUs per GPU, so the CPUs follow the GPUs of each run
        lines.append(f"#SBATCH --cpus-per-gpu={int(params['cpus_per_task'])}")
    elif params["cpus_per_task"]:
        lines.append(f"#SBATCH --cpus-per-task={int(params['cpus_per_task'])}")
    lines += ["", "export SUBMITIT_EXECUTOR=hops"]
    if int(params["tasks_per_node"]) > 1:
        lines.append(f"export {DATA_PARALLEL_ENV}=1")
        lines += data_parallel_launch(command, params)
    else:
        lines.append(f"exec {command}")
    return "\n".join([*lines, ""])


def data_parallel_launch(command: str, params: dict[str, Any]) -> list[str]:
    """One srun task per GPU of this run (its total is in Slurm's AllocTRES)."""
    cpus = int(params["cpus_per_task"] or 1)
    return [
        "gpus=\"$(scontrol show job \"${SLURM_JOB_ID}\" | grep -o 'gres/gpu=[0-9]*' | head -n 1"
        " | cut -d= -f2)\"",
        f"exec srun --ntasks=\"${{gpus}}\" --gpus-per-task=1 --cpus-per-task={cpus} {command}",
    ]


def submit_argv(hops: str, script: str, params: dict[str, Any]) -> list[str]:
    """``hops submit SCRIPT --gpus ... --samples ... --parsable -- SBATCH_ARGS``."""
    samples = params["samples"]
    if samples is None or isinstance(samples, bool) or int(samples) <= 0:
        raise ValueError("samples: give the job's size in samples (hops_samples=...), > 0")
    argv = [hops, "submit", script, "--gpus", demand_text(params["gpus"])]
    argv += ["--samples", str(int(samples)), "--batch-size", str(int(params["batch_size"]))]
    argv += ["--model", str(params["model"]), "--params", f"{float(params['params']):g}"]
    if params["lr"] is not None:
        argv += ["--lr", f"{float(params['lr']):g}", "--lr-scale", str(params["lr_scale"])]
    for option in ("types", "exclude_types"):
        if params[option]:
            argv += [f"--{option.replace('_', '-')}", str(params[option])]
    argv.append("--parsable")
    extra = [str(a) for a in params["sbatch_args"]]
    return [*argv, "--", *extra] if extra else argv


def demand_text(gpus: Any) -> str:
    """A demand set as ``hops submit --gpus`` takes it: "1,2,4", "2-8", or one count."""
    if isinstance(gpus, bool):
        raise ValueError(f"gpus: {gpus!r} is not a GPU count")
    if isinstance(gpus, int):
        return str(gpus)
    if isinstance(gpus, list | tuple):
        return ",".join(str(int(g)) for g in gpus)
    if isinstance(gpus, str) and gpus.strip():
        return gpus.strip()
    raise ValueError(f"gpus: {gpus!r} is not a demand set")
