#!/usr/bin/env python3
"""Real PyTorch jobs of mixed sizes under a real hopsd, profiling on: what they lost.

Submits ``--jobs`` real jobs (``examples/pytorch``: the ``train.sh`` template, the
Lightning template and plain ``srun python train.py`` scripts, demand sets
from 1 to 1,2,4) with ``hops submit`` to the live test cluster, lets hopsd
profile, place, move and preempt them until all end, then reads what every
rank of every run logged and prints one JSON object with ``--json``. The
a100 servers are held by plain jobs outside hops until every job has trained
on the slower types; then they free, and hopsd moves jobs onto them (and
preempts where the fast GPUs are worth more to a job of higher priority).

Figures:

``jobs``, ``moves``, ``preemptions`` (hopsd's done requeues by kind,
profiling stops included in ``preemptions``), ``ranks_signalled``,
``ranks_missed`` (ranks of a noticed run that never heard the signal),
``samples_repeated``, ``samples_skipped`` (against each job's own order),
``loss_gap`` (the largest relative gap of a job's final loss to one process
trained through the same world sizes) and ``lost_fraction`` (samples trained
twice over samples trained).

Needs the test cluster (``bash docker/cluster.sh up`` and its exports) and
PyTorch. Usage: benchmarks/real_jobs.py [--jobs 6] [--json]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))

from daemon_live import LiveEnv, hopsd_process
from figures import print_figures
from real_jobs import (
    GRACE_S,
    ROUND_S,
    block_gpus,
    loss_gap,
    plain_script,
    ranks,
    reported_runs,
    requeues_by_kind,
    sample_count,
    slurm_state,
    submit,
    template_script,
    wait_for,
)

SCHEDULER = "profiling = true\nprofiling_iterations = 5\nprofiling_timeout_s = 90.0\n"


def lightning(env: LiveEnv, label: str, folder: Path) -> str:
    return template_script(env, label, folder, "train_lightning.sh")


#: label, script, demand set, samples
MIX = [
    ("ddp-a", template_script, "1,2,4", 24_000),
    ("plain-a", plain_script, "1", 8_000),
    ("lightning-a", lightning, "1,2", 12_000),
    ("ddp-b", template_script, "2,4", 24_000),
    ("plain-b", plain_script, "1,2", 10_000),
    ("ddp-c", template_script, "1,2", 12_000),
]


def run(count: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="hops-realbench-"))
    root.chmod(0o755)
    env = LiveEnv.create(root, grace_s=GRACE_S, scheduler=SCHEDULER,
                         extra="requeue_wait_s = 2.0\n", round_s=ROUND_S)  # fmt: skip
    daemon = hopsd_process(env)
    started = time.monotonic()
    try:
        env.blockers.extend(
            b for node in ("a100n1", "a100n2") for b in block_gpus(node, 4, f"{env.prefix}block")
        )
        jobs = []
        for i in range(count):
            label, script, gpus, samples = MIX[i % len(MIX)]
            jobs.append(submit(env, f"{label}{i}", gpus=gpus, samples=samples, script=script))
        wait_for(lambda: all(reported_runs(env, j) - {0} for j in jobs), 300, 2)
        subprocess.run(["scancel", *map(str, env.blockers)], capture_output=True, timeout=20)
        finished = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
        all_done = wait_for(lambda: all(slurm_state(j.slurm_id) in finished for j in jobs), 3600, 5)
        figures = summarise(env, jobs)
        figures["all_completed"] = float(
            all_done and all(slurm_state(j.slurm_id) == "COMPLETED" for j in jobs)
        )
        figures["seconds"] = round(time.monotonic() - started, 1)
        return figures
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        env.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def summarise(env: LiveEnv, jobs: list) -> dict[str, float]:  # type: ignore[type-arg]
    moves = preemptions = signalled = missed = repeated = skipped = trained = 0
    gaps = []
    for job in jobs:
        kinds = requeues_by_kind(env, job.slurm_id)
        moves += kinds["move"]
        preemptions += kinds["preempt"]
        heard = ranks(job)
        signalled += heard.signalled
        missed += heard.missed
        count = sample_count(job)
        repeated += count.repeated
        skipped += count.skipped
        trained += count.trained
        if job.result.exists():
            gaps.append(loss_gap(job)[1])
    return {
        "jobs": len(jobs),
        "moves": moves,
        "preemptions": preemptions,
        "ranks_signalled": signalled,
        "ranks_missed": missed,
        "samples_repeated": repeated,
        "samples_skipped": skipped,
        "loss_gap": float(f"{max(gaps, default=float('nan')):.3g}"),
        "lost_fraction": round(repeated / trained, 5) if trained else float("nan"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run(max(args.jobs, 1))
    print_figures(figures, args.json, 18)
    return 0


if __name__ == "__main__":
    sys.exit(main())
