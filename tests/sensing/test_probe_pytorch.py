"""The probe's PyTorch helpers: ranks from torchrun or srun, threads, the agreed notice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hops_probe import Probe
from hops_probe import pytorch as hops
from hopsd.slurm.tag import HopsTag


def test_torchruns_variables_win_over_sruns() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
           "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"}  # fmt: skip
    assert hops.world(env) == hops.World(3, 4, 1, 2)


def test_an_srun_task_reads_its_rank_and_the_tasks_on_its_node() -> None:
    env = {"SLURM_PROCID": "2", "SLURM_NTASKS": "3", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0",
           "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "2,1"}  # fmt: skip
    assert hops.world(env) == hops.World(2, 3, 0, 1)
    env["SLURM_STEP_TASKS_PER_NODE"], env["SLURM_NODEID"] = "2(x2)", "1"
    assert hops.world(env).local_world_size == 2


def test_the_batch_script_itself_is_one_process_whatever_ntasks_says() -> None:
    assert hops.world({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}) == hops.World(0, 1, 0, 1)
    assert hops.world({}) == hops.World(0, 1, 0, 1)


def test_threads_are_the_tasks_cpus_or_the_nodes_shared_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    four_local = hops.World(0, 4, 0, 4)
    assert hops.cpu_threads(four_local, {"SLURM_CPUS_ON_NODE": "8"}) == 2
    assert hops.cpu_threads(four_local, {"SLURM_CPUS_ON_NODE": "2"}) == 1
    task = {"SLURM_CPUS_PER_TASK": "3", "SLURM_STEP_ID": "0", "SLURM_CPUS_ON_NODE": "12"}
    assert hops.cpu_threads(four_local, task) == 3
    # more threads than the cores a rank may use only spin against each other
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert hops.cpu_threads(four_local, {"SLURM_CPUS_ON_NODE": "8"}) == 1
    assert hops.cpu_threads(hops.World(0, 1, 0, 1), task) == 2


@pytest.mark.parametrize("rule", ["linear", "sqrt", "none"])
def test_the_jobs_lr_rule_is_the_one_hops_gives_in_probe_lr(rule: str) -> None:
    tag = HopsTag((1, 2, 4), 1000.0, 32, lr=(0.1,), lr_scale=rule)
    for gpus in (1, 2, 4):
        assert hops.scaled_lr(0.1, gpus, rule, base_gpus=1) == pytest.approx(tag.lr_for(gpus))
    with pytest.raises(ValueError, match="linear, sqrt or none"):
        hops.scaled_lr(0.1, 2, "cubic")


def test_rendezvous_keeps_what_is_set_and_gives_each_run_its_own_port() -> None:
    env = {"SLURM_JOB_ID": "41", "SLURM_RESTART_COUNT": "0"}
    addr, first = hops.rendezvous(env)
    assert addr == "127.0.0.1" and env["MASTER_PORT"] == str(first)
    again = {"SLURM_JOB_ID": "41", "SLURM_RESTART_COUNT": "1"}
    assert hops.rendezvous(again)[1] != first
    assert hops.rendezvous({"MASTER_ADDR": "n1", "MASTER_PORT": "29500"}) == ("n1", 29500)


def test_a_synchronize_hook_ends_every_timed_phase_and_iteration(tmp_path: Path) -> None:
    calls: list[str] = []
    env = {"HOPS_PROBE_MODE": "profile", "HOPS_NOTICE_SIGNAL": "none",
           "HOPS_SPOOL_DIR": str(tmp_path)}  # fmt: skip
    probe = Probe(environ=env)
    probe.synchronize = lambda: calls.append("sync")
    with probe.iteration(samples=8) as it:
        with it.phase("forward"):
            pass
        with it.phase("backward"):
            pass
    assert calls == ["sync", "sync", "sync"]


def test_wait_for_requeue_gives_up_after_its_timeout() -> None:
    slept: list[float] = []
    hops.wait_for_requeue(0.0, sleep=slept.append)
    assert slept == []


AGREE = textwrap.dedent(
    """
    import os, signal, sys, time
    from hops_probe import Probe
    probe = Probe(environ={"HOPS_PROBE_MODE": "off", "HOPS_NOTICE_SIGNAL": "USR1"})
    import torch.distributed as dist
    from hops_probe import pytorch as hops
    rank = hops.World(int(sys.argv[1]), 2, int(sys.argv[1]), 2)
    hops.init_distributed(rank, backend="gloo", timeout_s=60)
    answers = [hops.agree_on_notice(probe)]          # nobody heard anything yet
    if rank.rank == 1:
        os.kill(os.getpid(), signal.SIGUSR1)         # only rank 1 hears the notice
    dist.barrier()
    answers.append(hops.agree_on_notice(probe))
    saved = []
    stopped = hops.stop_for_notice(probe, rank, lambda: saved.append(rank.rank))
    print(rank.rank, answers, stopped, saved, flush=True)
    dist.destroy_process_group()
    """
)


def test_ranks_agree_on_a_notice_only_one_of_them_heard(tmp_path: Path) -> None:
    """Two real gloo ranks: rank 1 alone is signalled, both stop, rank 0 alone saves."""
    pytest.importorskip("torch")
    script = tmp_path / "agree.py"
    script.write_text(AGREE)
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(29000 + os.getpid() % 900)}
    argv = [sys.executable, str(script)]
    procs = [
        subprocess.Popen([*argv, str(r)], env=env, stdout=subprocess.PIPE, text=True)
        for r in (0, 1)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0].strip() == "0 [False, True] True [0]"
    # rank 1 heard it but the checkpoint it reported was written by rank 0
    assert outs[1].strip() == "1 [False, True] True []"


CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    heard = []
    signal.signal(signal.SIGUSR1, lambda *a: heard.append(1))
    print("ready", flush=True)
    end = time.time() + 5
    while not heard and time.time() < end:
        time.sleep(0.05)
    print("heard" if heard else "deaf", flush=True)
    """
)


def test_the_torchrun_launcher_passes_the_notice_to_workers_in_their_own_sessions(
    tmp_path: Path,
) -> None:
    """Like torchrun's workers, the child runs in a session of its own: a signal to the
    launcher's process group misses it, the launcher's forwarding reaches it."""
    from hops_probe import torchrun

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert child.pid in torchrun.descendants(os.getpid())
        torchrun._forward(signal.SIGUSR1, None)
        assert child.communicate(timeout=20)[0].strip() == "heard"
    finally:
        child.kill()


def test_a_rank_whose_signal_comes_after_the_agreement_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    probe = Probe(environ={"HOPS_PROBE_MODE": "off", "HOPS_NOTICE_SIGNAL": "USR1",
                           "HOPS_SPOOL_DIR": str(tmp_path)})  # fmt: skip
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1)).start()
    assert hops.tell_notice(probe, 1, 2, probe.notices_heard, 640) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[5] for line in lines] == ["heard=no", "heard=late"]


def test_the_torchrun_launcher_ends_on_the_requeues_sigterm_with_one_line(
    tmp_path: Path,
) -> None:
    """Slurm's requeue ends a run with SIGTERM: one line in the job's output, no
    traceback, and the exit status of a process that SIGTERM ended."""
    pytest.importorskip("torch")
    ready = tmp_path / "ready"
    worker = tmp_path / "worker.py"
    worker.write_text(
        f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\ntime.sleep(60)\n"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-m", "hops_probe.torchrun", "--nproc-per-node=1",
         "--master-port=29731", str(worker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ready.exists(), "the worker never started"
        launcher.send_signal(signal.SIGTERM)
        _, err = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert "hops_probe.torchrun: stopped by SIGTERM, workers ended" in err
