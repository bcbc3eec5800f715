"""contrib/job_submit.lua, live: plain sbatch jobs sent to partition `hops` become hops jobs.

`docker/cluster.sh up` installs the plugin on every release it runs (22.05,
24.11, in a container too), with `hops` as the partition it takes over. A plain
GPU job sent there must come out held, requeueable and tagged (demand set from
the request or from `--comment=hops:gpus=...`, size from the time limit), other
jobs untouched; and hopsd must then schedule such jobs like its own, putting
the job that gains most from the fast GPUs on them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from daemon_live import PYTHON, TRAIN_JOB, LiveEnv, drive
from slurm_cli import sbatch
from tick_steps import observe_and_reconcile

from hopsd.daemon.tick import Tick
from hopsd.ledger.throughput_store import SqlThroughputStore
from hopsd.slurm.port import SlurmJob

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not Path(os.environ.get("HOPS_CLUSTER_DIR", "/nonexistent"), "job_submit.lua").exists(),
        reason="the test cluster runs without contrib/job_submit.lua",
    ),
]

REFERENCE_THROUGHPUT = 100.0  # as in contrib/job_submit.lua and hops.conf's default


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    live = LiveEnv.create(tmp_path)
    yield live
    live.cleanup()


def listed(env: LiveEnv, job_id: int) -> SlurmJob:
    [job] = [j for j in env.port.list_jobs() if j.job_id == job_id]
    return job


def test_plain_gpu_jobs_sent_to_hops_become_held_tagged_hops_jobs(env: LiveEnv) -> None:
    sized = sbatch(
        "-J", f"{env.prefix}a", "-p", "hops", "--gres=gpu:2", "-t", "5", "--wrap", "true"
    )
    hinted = sbatch(
        *("-J", f"{env.prefix}b", "-p", "hops", "--gpus=1"),
        *("--comment", "hops:gpus=4,1,2 samples=3000 batch=64", "--wrap", "true"),
    )
    elsewhere = sbatch("-J", f"{env.prefix}c", "-p", "all", "--gres=gpu:1", "--wrap", "true")
    cpu_only = sbatch("-J", f"{env.prefix}d", "-p", "hops", "--hold", "--wrap", "true")
    typed = sbatch(
        "-J", f"{env.prefix}e", "-p", "hops", "--hold", "--gres=gpu:a100:1", "--wrap", "true"
    )
    env.blockers += [sized, hinted, elsewhere, cpu_only, typed]

    a = listed(env, sized)
    assert a.pending and a.held and a.tag is not None and a.tag_error is None
    assert a.tag.demands == (2,)
    assert a.tag.total_samples == 5 * 60 * REFERENCE_THROUGHPUT * 2  # sized on the time limit
    b = listed(env, hinted)
    assert b.held and b.tag is not None and b.tag.demands == (1, 2, 4)
    assert (b.tag.total_samples, b.tag.batch_size) == (3000, 64)
    for untouched in (elsewhere, cpu_only, typed):
        assert listed(env, untouched).tag is None and not listed(env, untouched).comment
    assert (
        "Requeue=1"
        in subprocess.run(
            ["scontrol", "show", "job", str(sized)], capture_output=True, text=True, timeout=20
        ).stdout
    )


def plain_training_job(env: LiveEnv, label: str, type_speed: str) -> int:
    script = env.root / f"{label}.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"export HOPS_SPOOL_DIR={env.spool}\n"
        f"exec {PYTHON} {TRAIN_JOB} --samples 1e6 --batch 32 --type-speed '{type_speed}'\n"
    )
    job = sbatch(
        *("-J", f"{env.prefix}{label}", "-p", "hops", "--gres=gpu:4", "-t", "10"),
        *("-o", str(env.root / "%j.out"), "--open-mode=append", str(script)),
    )
    env.submitted.append(job)
    return job


def test_hopsd_puts_the_plain_job_that_gains_most_on_the_fast_gpus(env: LiveEnv) -> None:
    """One free a100 node, one free v100 node, two plain 4-GPU jobs: the gainer gets a100."""
    blocker = sbatch(
        *("-J", f"{env.prefix}block", "-p", "all", "-w", "a100n2,v100n2", "-N2"),
        *("--gres=gpu:4", "--wrap", "sleep 300"),
    )
    env.blockers.append(blocker)
    # Slurm starts it at its next scheduling pass; on a busy host that can be a backfill
    # pass (30 s) away. What it waited for is said if it never starts.
    assert drive(lambda: None, lambda: listed(env, blocker).running, 75, 0.5), "\n".join(
        subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        for argv in (
            ["squeue", "-a", "-o", "%i %u %T %R %N"],
            ["sinfo", "-N", "-o", "%N %T %E"],
            ["scontrol", "show", "reservation"],
        )
    )
    flat = plain_training_job(env, "flat", "a100=1.1,v100=1.0")
    gainer = plain_training_job(env, "gainer", "a100=8")
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    assert set(observe_and_reconcile(tick).adopted) == {str(flat), str(gainer)}
    with env.sessions.begin() as s:  # what profiling would have measured
        store = SqlThroughputStore(s, 0.0)
        for job, a100 in ((gainer, 800.0), (flat, 220.0)):
            for gpus in (1, 2, 4):
                for kind, rate in (("k80", 100.0), ("v100", 200.0), ("a100", a100)):
                    store.set_type_aggregated(str(job), kind, gpus, rate)
    assert drive(
        tick.run_once, lambda: listed(env, flat).running and listed(env, gainer).running, 60
    )
    assert listed(env, gainer).placement == {"a100n1": 4}
    assert listed(env, flat).placement == {"v100n1": 4}
