"""Live: the centre's policy as Slurm keeps it -- GPU limits and fair shares -- rules hops.

On the Slurm test cluster a real ``hopsd`` schedules short jobs of root in
accounts the test makes with ``sacctmgr``:

* **GPU limit** -- account ``hopslim`` has ``GrpTRES=gres/gpu=2``, QOS
  ``hopsq1`` ``MaxTRESPerUser=gres/gpu=1``. With ``[slurm] limits = true`` hops
  never has more GPUs of their jobs running, although plenty are free and each
  job takes up to 2 (hops reading no limit starts all three jobs at once: the
  test cluster does not enforce limits, so what hops plans is what runs).
* **Partition MaxTime** -- with the a100 and v100 partitions' MaxTime at 5
  minutes, a job of ``-t 10`` runs through k80 (placed on a100, the fastest, it
  would stay pending for ever: ``PartitionTimeLimit``).
* **Fair share from Slurm** -- accounts ``hopsfs3`` and ``hopsfs1`` have shares
  3 and 1 in Slurm's association tree, and hops.conf none: with
  ``[fairshare] source = "slurm"`` their GPU-seconds on the two k80 GPUs, both
  always having work queued, come out near 3:1 (without the shares, near 1:1).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hops_conf
import pytest
from centre_live import accounting_kept
from daemon_live import LIVE, LiveEnv, hopsd_process

from hopsd.config import parse_config
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = [
    *LIVE,
    pytest.mark.skipif(os.geteuid() != 0, reason="sacctmgr changes need root"),
]

LIMITED = "hopslim"
FS3, FS1 = "hopsfs3", "hopsfs1"
#: A QOS that lets each user hold one GPU (root may use it in account FS1).
QOS = "hopsq1"


def sacctmgr(*args: str) -> None:
    subprocess.run(["sacctmgr", "-i", *args], capture_output=True, timeout=30, check=False)


@pytest.fixture(scope="module")
def accounts() -> None:
    """The test's accounts, root a user in each (made once; changed to the test's values)."""
    why = accounting_kept()
    if why:
        pytest.skip(why)
    shares = {LIMITED: 1, FS3: 3, FS1: 1}
    for account, share in shares.items():
        sacctmgr("add", "account", account, f"fairshare={share}")
        sacctmgr("modify", "account", account, "set", f"fairshare={share}")
    sacctmgr("modify", "account", LIMITED, "set", "GrpTRES=gres/gpu=2")
    sacctmgr("add", "user", "root", f"account={','.join(shares)}")
    sacctmgr("add", "qos", QOS, "MaxTRESPerUser=gres/gpu=1")
    sacctmgr("modify", "qos", QOS, "set", "MaxTRESPerUser=gres/gpu=1")
    sacctmgr("modify", "user", "root", "where", f"account={FS1}", "set", f"qos+={QOS}")
    listed = subprocess.run(
        ["sacctmgr", "-n", "-P", "show", "assoc", "format=Account,User,GrpTRES"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    assert f"{LIMITED}||gres/gpu=2" in listed and f"{FS1}|root|" in listed, listed
    qos = subprocess.run(
        ["sacctmgr", "-n", "-P", "show", "qos", QOS, "format=Name,MaxTRESPU"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    assert qos.strip() == f"{QOS}|gres/gpu=1", qos


def configured(env: LiveEnv, changes: hops_conf.Changes) -> LiveEnv:
    """``env`` with its hops.conf changed (the ledger and spool stay)."""
    tables = hops_conf.live(env.config.ledger_url, env.spool_root, changes)
    text = hops_conf.render(tables)
    env.config_path.write_text(text)
    env.config = parse_config(text, str(env.config_path))
    return env


@pytest.fixture
def env(tmp_path: Path, accounts: None) -> Iterator[LiveEnv]:
    live = LiveEnv.create(tmp_path)
    yield live
    live.cleanup()


def submit(
    env: LiveEnv, account: str, demands: tuple[int, ...], seconds: int, label: str, qos: str = ""
) -> int:
    script = env.root / f"{label}.sh"
    script.write_text(f"#!/bin/bash\nsleep {seconds}\n")
    args = ["-J", f"{env.prefix}{label}", "-A", account, "-o", "/dev/null", "-t", "10"]
    args += [f"--qos={qos}"] if qos else []
    job = env.port.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag(demands, 1e4)))
    env.submitted.append(job)
    return job


def running_gpus(env: LiveEnv, jobs: set[int]) -> dict[int, int]:
    return {j.job_id: j.gpus for j in env.port.list_jobs() if j.job_id in jobs and j.running}


@pytest.mark.parametrize(
    ("account", "qos", "limit"),
    [(LIMITED, "", 2), (FS1, QOS, 1)],
    ids=["account-GrpTRES", "qos-MaxTRESPerUser"],
)
def test_a_gpu_limit_is_never_planned_past(
    env: LiveEnv, account: str, qos: str, limit: int
) -> None:
    configured(env, {"slurm": {"limits": True}})
    jobs = {submit(env, account, (1, 2), 10, f"lim{i}", qos) for i in range(3)}
    daemon = hopsd_process(env)
    most, ran, told = 0, set(), set()
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and not env.all_terminal():
            held = running_gpus(env, jobs)
            ran |= set(held)
            most = max(most, sum(held.values()))
            told |= {r.plan_reason for r in env.rows().values() if r.plan_reason}
            time.sleep(0.5)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    log = (env.root / "hopsd.log").read_text()
    assert most <= limit, f"{account} {qos} held {most} GPUs past its limit of {limit}"
    assert ran == jobs, f"ran {sorted(ran)} of {sorted(jobs)}\n{log[-3000:]}"
    # a job the limit holds back says so (hops status shows it)
    assert any("Slurm's GPU limit" in why for why in told), told


@pytest.fixture
def short_partitions() -> Iterator[None]:
    """The a100 and v100 partitions with a MaxTime of 5 minutes (unlimited again after)."""
    for name in ("a100", "v100"):
        subprocess.run(["scontrol", "update", f"PartitionName={name}", "MaxTime=5"], check=True)
    try:
        yield
    finally:
        for name in ("a100", "v100"):
            subprocess.run(
                ["scontrol", "update", f"PartitionName={name}", "MaxTime=INFINITE"], check=True
            )


def test_a_job_runs_through_a_partition_whose_max_time_it_fits(
    env: LiveEnv, short_partitions: None
) -> None:
    configured(env, {"slurm": {"limits": True}})
    job = submit(env, LIMITED, (1,), 5, "long")  # -t 10: past the a100 and v100 MaxTime
    daemon = hopsd_process(env)
    seen = None
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and seen is None:
            seen = next((j for j in env.port.list_jobs() if j.job_id == job and j.running), None)
            time.sleep(0.5)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    pending = [(j.partition, j.reason) for j in env.port.list_jobs() if j.job_id == job]
    assert seen is not None, f"never started: {pending}"
    assert seen.partition == "k80"


def gpu_seconds(job_ids: set[int]) -> float:
    """GPU-seconds the jobs held, from the accounting database (every run, requeues too)."""
    ids = ",".join(map(str, sorted(job_ids)))
    out = subprocess.run(
        ["sacct", "-D", "-X", "-n", "-P", "-j", ids, "-o", "ElapsedRaw,AllocTRES"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    total = 0.0
    for line in out.splitlines():
        elapsed, _, tres = line.partition("|")
        gpus = next((int(p[9:]) for p in tres.split(",") if p.startswith("gres/gpu=")), 0)
        total += int(elapsed or 0) * gpus
    return total


def one(env: LiveEnv, account: str, i: int) -> tuple[str, int]:
    """Job ``i`` of ``account``: a run of 5 to 12 s on one GPU."""
    return account, submit(env, account, (1,), 5 + i * 5 % 8, f"{account}-{i}")


def test_shares_read_from_slurm_converge_to_three_to_one(env: LiveEnv) -> None:
    configured(
        env,
        {
            "slurm": {"partitions": ["v100"]},
            "scheduler": {"round_length_s": 30.0},
            "fairshare": {"weight": 4.0, "half_life_h": 1.0, "source": "slurm"},
        },
    )
    # more jobs than the window can run: both accounts always have work queued; runs of
    # 5 to 12 s, so GPUs fall free a few at a time and each decision hands out few
    wanted = [(FS3, i) for i in range(80)] + [(FS1, i) for i in range(30)]
    wanted.sort(key=lambda w: w[1])
    daemon = hopsd_process(env)
    try:
        with ThreadPoolExecutor(6) as pool:
            made = list(pool.map(lambda w: one(env, *w), wanted))
        time.sleep(90)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        env.cleanup()
    time.sleep(2)  # the accounting database records the cancelled runs' ends
    fs3 = gpu_seconds({j for a, j in made if a == FS3})
    fs1 = gpu_seconds({j for a, j in made if a == FS1})
    print(f"GPU-seconds: {FS3} {fs3:.0f}, {FS1} {fs1:.0f}, ratio {fs3 / max(fs1, 1):.2f}")
    assert fs1 > 0, (env.root / "hopsd.log").read_text()[-3000:]
    assert 2.2 <= fs3 / fs1 <= 4.0, f"GPU-seconds {fs3:.0f}:{fs1:.0f}, not near 3:1"
