"""Real PyTorch jobs under a real hopsd on the live test cluster.

Shared by the live tests (``test_live_real_pytorch.py``) and
``benchmarks/real_jobs.py``. Jobs are submitted the way users submit them,
with ``hops submit`` on a batch script, and train ``examples/pytorch/train.py``
(a small CNN, DDP over gloo). Each rank logs the sample ids it trained;
what a job lost or repeated is read from those logs against the job's own
sample order, and its final loss is compared with a one-process run through
the same world sizes (``train.py --reference``).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from daemon_live import PYTHON, LiveEnv
from sqlalchemy import select

from hopsd.ledger.models import IntentAction, IntentRow, IntentState

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "pytorch"
HOPS = str(Path(sys.executable).with_name("hops"))
WIDTH = 8  # channels of the example CNN: small, the machine's 2 cores run many ranks
DATASET = 4096
#: samples/s of one fake GPU per type (train.py --device-rate; v100n2 and a100n2 run at half)
DEVICE_RATE = "a100=200,v100=100,k80=50"
GRACE_S = 20.0  # room for 4 ranks importing torch on a loaded 2-core machine
#: Rounds long enough for a move to pay off within one: hopsd prices a move at the
#: restart it measured whole (decision to first iteration after it), 8-15 s for these
#: jobs here, and a move that loses more than a round's share never pays in the plan.
ROUND_S = 30.0
#: a moved job's final loss against one process through the same world sizes. The
#: test jobs train in float64 (``--precision 64``): in float32 the thread count alone
#: moves this example's final loss by about 1% (rounding, amplified over thousands of
#: steps), more than a resume that drops the optimizer's momentum costs (0.5% on a
#: 1-2-4 history of 60k samples); in float64 the gap of an exact resume is rounding,
#: orders below this bound, and the momentum drop is 5000 times over it
LOSS_TOLERANCE = 1e-6


def data_module() -> ModuleType:
    """The example's ``data.py`` (dataset and sample order), imported by path."""
    spec = importlib.util.spec_from_file_location("hops_example_data", EXAMPLES / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class RealJob:
    """One submitted real job: where its files are, and what the test expects of it."""

    slurm_id: int
    label: str
    folder: Path
    samples: int
    outputs: str = "*.out"  # the job's output files, a glob under ``folder``

    @property
    def ids_dir(self) -> Path:
        return self.folder / "ids"

    @property
    def result(self) -> Path:
        return self.folder / "result.json"

    def output(self) -> str:
        """Every run's output (``--open-mode=append``: one file per job, or submitit's logs)."""
        files = sorted(self.folder.glob(self.outputs))
        return "".join(p.read_text(errors="replace") for p in files)


def train_args(job_folder: Path, extra: str = "") -> str:
    """train.py's options for a test job: its logs and result in the job's folder."""
    return (
        f"--width {WIDTH} --dataset-size {DATASET} --checkpoint {job_folder}/ckpt.pt "
        f"--sample-log {job_folder}/ids --result {job_folder}/result.json "
        f"--device-rate {DEVICE_RATE} --precision 64 {extra}"
    ).strip()


def plain_script(env: LiveEnv, label: str, folder: Path) -> str:
    """The issue's plain job: ``srun python train.py``, no trap, no exec, no torchrun."""
    return (
        "#!/bin/bash\n"
        f"#SBATCH -J {env.prefix}{label}\n"
        f"#SBATCH -o {folder}/%j.out\n"
        "#SBATCH --open-mode=append\n"
        "#SBATCH -t 20\n"
        f"cd {folder}\n"
        f"srun {PYTHON} {folder}/train.py {train_args(folder)}\n"
    )


def template_script(env: LiveEnv, label: str, folder: Path, name: str = "train.sh") -> str:
    """A template of ``examples/pytorch`` as a user copies it: name and output changed."""
    text = (EXAMPLES / name).read_text()
    text = re.sub(r"#SBATCH --job-name=\S+", f"#SBATCH --job-name={env.prefix}{label}", text)
    return re.sub(r"#SBATCH --output=\S+", f"#SBATCH --output={folder}/%j.out", text)


def submit(
    env: LiveEnv,
    label: str,
    *,
    gpus: str,
    samples: int,
    script: Callable[[LiveEnv, str, Path], str] = plain_script,
    options: Iterable[str] = (),
    extra_train: str = "",
) -> RealJob:
    """``hops submit`` a real job from its own folder, as its user would."""
    folder = env.root / label
    folder.mkdir(parents=True, exist_ok=True)
    for source in EXAMPLES.glob("*.py"):  # the user's copy of the example
        shutil.copy(source, folder / source.name)
    path = folder / f"{label}.sh"
    path.write_text(script(env, label, folder))
    path.chmod(0o755)
    variables = {
        "HOPS_CONF": str(env.config_path),
        "PYTHON": PYTHON,
        "TRAIN_ARGS": train_args(folder, extra_train),
        "PATH": f"{Path(PYTHON).parent}:/usr/bin:/bin:/usr/sbin:/sbin",
    }
    import os

    argv = [HOPS, "submit", str(path), "--gpus", gpus, "--samples", str(samples),
            "--batch-size", "32", "--model", "cnn", "--params", "2e4", "--parsable",
            *options]  # fmt: skip
    out = subprocess.run(
        argv, cwd=folder, env={**os.environ, **variables}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    job = RealJob(int(out.stdout.strip().splitlines()[-1]), label, folder, samples)
    env.submitted.append(job.slurm_id)
    return job


# ------------------------------------------------------------------- what happened


@dataclass
class SampleCount:
    trained: int
    repeated: int
    skipped: int


def sample_count(job: RealJob) -> SampleCount:
    """Sample ids every rank of every run logged, against the job's own order."""
    data = data_module()
    expected = collections.Counter(data.GlobalOrder(DATASET, 0).ids(0, job.samples).tolist())
    seen: collections.Counter[int] = collections.Counter()
    for path in sorted(job.ids_dir.glob("*.ids")):
        for line in path.read_text().splitlines():
            seen.update(int(x) for x in line.split())
    return SampleCount(
        sum(seen.values()), sum((seen - expected).values()), sum((expected - seen).values())
    )


@dataclass
class Ranks:
    """Per run of a job: its world size and the ranks that said they heard the notice."""

    world: dict[int, int] = field(default_factory=dict)
    stopped: dict[int, set[int]] = field(default_factory=dict)
    noticed: dict[int, set[int]] = field(default_factory=dict)

    @property
    def signalled(self) -> int:
        """Ranks that heard hopsd's signal themselves, over all noticed runs."""
        return sum(len(r) for r in self.noticed.values())

    @property
    def missed(self) -> int:
        """Ranks of a run that stopped for a notice without hearing the signal."""
        return sum(self.world.get(run, 0) - len(self.noticed.get(run, ())) for run in self.stopped)


def ranks(job: RealJob) -> Ranks:
    """From the job's output: ``start: run R rank r/W`` and ``notice: run R rank r/W``."""
    out = Ranks()
    for run, _rank, size in re.findall(r"start: run (\d+) rank (\d+)/(\d+)", job.output()):
        out.world[int(run)] = int(size)
    pattern = r"notice: run (\d+) rank (\d+)/(\d+) heard=(yes|no|late)"
    for run, rank, _size, heard in re.findall(pattern, job.output()):
        out.stopped.setdefault(int(run), set()).add(int(rank))
        if heard in ("yes", "late"):
            out.noticed.setdefault(int(run), set()).add(int(rank))
    return out


def requeues_by_kind(env: LiveEnv, slurm_id: int) -> collections.Counter[str]:
    """hopsd's done requeues of the job, by kind (``move``, ``preempt``)."""
    with env.sessions.begin() as s:
        rows = s.scalars(select(IntentRow).where(IntentRow.action == IntentAction.REQUEUE_HOLD))
        kinds = collections.Counter(
            str(r.payload.get("kind"))
            for r in rows
            if r.state == IntentState.DONE and int(r.payload.get("slurm_id", 0)) == slurm_id
        )
    return kinds


def reported_runs(env: LiveEnv, job: RealJob) -> set[int]:
    """Runs whose probe reported its first iteration (hopsd gives those notice)."""
    path = env.spool / f"{job.slurm_id}.jsonl"
    runs: set[int] = set()
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("kind") == "start":
                runs.add(int(record.get("run", -1)))
    return runs


def world_sizes(job: RealJob) -> list[int]:
    """The world size of each run that trained, in order (from its result file)."""
    history = json.loads(job.result.read_text())["history"]
    sizes = [int(h["world_size"]) for h in history]
    return [s for i, s in enumerate(sizes) if i == 0 or s != sizes[i - 1]]


def loss_gap(job: RealJob) -> tuple[float, float]:
    """(job's final loss, relative gap to one process through the same world sizes)."""
    live = json.loads(job.result.read_text())["loss"]
    argv = [PYTHON, str(job.folder / "train.py"), "--samples", str(job.samples),
            "--width", str(WIDTH), "--dataset-size", str(DATASET),
            "--reference", str(job.result)]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=True)
    reference = json.loads(out.stdout.strip().splitlines()[-1])["loss"]
    return live, abs(live - reference) / reference


def cancel(ids: list[int]) -> None:
    subprocess.run(["scancel", *map(str, ids)], capture_output=True, timeout=20, check=False)


def done(job: RealJob) -> bool:
    return slurm_state(job.slurm_id) in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


def explain(env: LiveEnv, job: RealJob) -> str:
    """The job's output and the end of hopsd's log: what a failed wait shows."""
    log = (env.root / "hopsd.log").read_text(errors="replace")[-4000:]
    return f"{job.output()[-3000:]}\n--- hopsd.log (end)\n{log}"


def a100_blocked_but_one(env: LiveEnv) -> tuple[list[int], list[int]]:
    """Fill the a100s with plain jobs but one GPU of the slow server; the ids per server."""
    name = f"{env.prefix}block"
    n1, n2 = block_gpus("a100n1", 4, name), block_gpus("a100n2", 3, name)
    env.blockers.extend(n1 + n2)
    assert wait_for(lambda: running(n1 + n2), 60)
    return n1, n2


def through_every_world_size(env: LiveEnv, job: RealJob, n1: list[int], n2: list[int]) -> None:
    """1 GPU on the slow a100 server, then 2 across both servers, then 4 on the fast
    one, then preempted for a job that needs every a100, then resumed once it is done."""
    assert wait_for(lambda: placement(env, job.slurm_id) == {"a100n2": 1}, 180), explain(env, job)
    assert wait_for(lambda: len(reported_runs(env, job)) >= 1, 120), explain(env, job)
    cancel(n1[:1])  # one GPU frees on the fast server: 2 GPUs across two nodes
    two = {"a100n1": 1, "a100n2": 1}
    assert wait_for(lambda: placement(env, job.slurm_id) == two, 240), explain(env, job)
    assert wait_for(lambda: len(reported_runs(env, job)) >= 2, 120), explain(env, job)
    cancel(n1[1:])  # the fast server frees: 4 GPUs on it
    assert wait_for(lambda: placement(env, job.slurm_id) == {"a100n1": 4}, 240), explain(env, job)
    assert wait_for(lambda: len(reported_runs(env, job)) >= 3, 120), explain(env, job)
    # a job that needs every a100 arrives: only a preemption makes room for it; once it
    # is done the preempted job resumes on the GPUs it leaves idle
    whole = submit(env, "whole", gpus="8", samples=3_000, options=["--types", "a100"])
    cancel(n2)
    preempted = lambda: requeues_by_kind(env, job.slurm_id)["preempt"] >= 1  # noqa: E731
    assert wait_for(preempted, 240), explain(env, job)
    assert wait_for(lambda: done(whole), 600), explain(env, whole)
    assert slurm_state(whole.slurm_id) == "COMPLETED", explain(env, whole)


def placement(env: LiveEnv, slurm_id: int) -> dict[str, int]:
    """``{node: GPUs}`` of the job while Slurm runs it, else empty."""
    for seen in env.port.list_jobs():
        if seen.job_id == slurm_id and seen.running:
            return seen.placement
    return {}


def slurm_state(slurm_id: int) -> str:
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", str(slurm_id), "-o", "state"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    return out.stdout.strip().splitlines()[-1].strip() if out.stdout.strip() else ""


def block_gpus(node: str, count: int, name: str) -> list[int]:
    """``count`` plain one-GPU jobs on ``node``: capacity hops does not control."""
    ids = []
    for _ in range(count):
        out = subprocess.run(
            ["sbatch", "--parsable", "-J", name, "-p", "all", "-w", node, "--gres=gpu:1",
             "-o", "/dev/null", "--wrap", "sleep 900"],
            capture_output=True, text=True, check=True, timeout=20,
        )  # fmt: skip
        ids.append(int(out.stdout.strip().split(";")[0]))
    return ids


def running(ids: Iterable[int]) -> bool:
    wanted = {str(i) for i in ids}
    out = subprocess.run(
        ["squeue", "-h", "-t", "R", "-o", "%i", "-j", ",".join(sorted(wanted))],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    return set(out.stdout.split()) == wanted


def wait_for(what: Callable[[], bool], deadline_s: float, interval_s: float = 1.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(interval_s)
    return what()


def summary(**figures: Any) -> str:
    return json.dumps(figures, sort_keys=True)
