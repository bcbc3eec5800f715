"""hops in a plain PyTorch loop: who this rank is, its CPU threads, and the notice.

Create the :class:`~hops_probe.Probe` first thing in the script, before
``import torch`` (seconds on a cold node): its handler must be in place when
hops's notice comes. Then::

    from hops_probe import Probe
    probe = Probe()
    import torch
    from hops_probe import pytorch as hops

    world = hops.world()                 # torchrun's or srun's variables
    torch.set_num_threads(hops.cpu_threads(world))
    hops.init_distributed(world)         # gloo on CPU, NCCL with GPUs
    hops.attach(probe)                   # true phase times on a GPU
    for batch in loader:
        with probe.iteration(samples=global_batch) as it:
            ...
        if hops.stop_for_notice(probe, world, save_checkpoint):
            hops.wait_for_requeue()

hopsd signals every process of the job, but a rank may be mid-iteration when
it comes, and another may not have been signalled at all (a launcher that
forwards to rank 0 only): :func:`agree_on_notice` is one ``all_reduce`` (MAX)
per call, so every rank stops after the same iteration and the checkpoint
holds one consistent state. Rank 0 writes it; the probe reports it, and
hopsd requeues the job without waiting out the grace.

torch is imported by the functions that need it, so this module costs nothing
until used.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from hops_probe import Probe

__all__ = [
    "World",
    "agree_on_notice",
    "attach",
    "cpu_threads",
    "heard_soon",
    "init_distributed",
    "notice_line",
    "rendezvous",
    "scaled_lr",
    "stop_for_notice",
    "tell_notice",
    "wait_for_requeue",
    "world",
]


@dataclass(frozen=True)
class World:
    """This process's place in the job: global and local rank, and sizes."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes checkpoints and reports."""
        return self.rank == 0


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    return int(raw) if raw.isdigit() else None


def _tasks_here(env: Mapping[str, str]) -> int | None:
    """Tasks of this step on this node, from ``SLURM_STEP_TASKS_PER_NODE`` (``2(x2),1``)."""
    raw = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    node = _int(env, "SLURM_NODEID") or 0
    counts: list[int] = []
    for part in filter(None, raw.split(",")):
        value, _, repeat = part.partition("(x")
        if not value.isdigit():
            return None
        counts += [int(value)] * (int(repeat.rstrip(")")) if repeat else 1)
    return counts[node] if node < len(counts) else None


def world(environ: Mapping[str, str] | None = None) -> World:
    """This rank from torchrun's variables, else from srun's, else a single process.

    torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and
    ``LOCAL_WORLD_SIZE``; a task that ``srun`` started has ``SLURM_PROCID``,
    ``SLURM_NTASKS`` and ``SLURM_LOCALID``. The batch script itself (no
    ``srun``) is one process, whatever ``SLURM_NTASKS`` says.
    """
    env = os.environ if environ is None else environ
    rank, size = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and size:
        local = _int(env, "LOCAL_RANK") or 0
        return World(rank, size, local, _int(env, "LOCAL_WORLD_SIZE") or size)
    rank, size = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
    if rank is not None and size and env.get("SLURM_STEP_ID", "batch") not in ("batch", ""):
        local = _int(env, "SLURM_LOCALID") or 0
        return World(rank, size, local, _tasks_here(env) or 1)
    return World(0, 1, 0, 1)


def cpu_threads(rank: World, environ: Mapping[str, str] | None = None) -> int:
    """The CPU threads Slurm gave this rank: its task's CPUs, or the node's shared out.

    ``SLURM_CPUS_PER_TASK`` when the ranks were started with
    ``--cpus-per-task``; otherwise the CPUs of this node
    (``SLURM_CPUS_ON_NODE``) divided among the ranks on it; never more than
    this rank's share of the cores it may run on; at least one.
    """
    env = os.environ if environ is None else environ
    local = max(rank.local_world_size, 1)
    per_task = _int(env, "SLURM_CPUS_PER_TASK")
    if not (per_task and env.get("SLURM_STEP_ID", "batch") not in ("batch", "")):
        per_task = (_int(env, "SLURM_CPUS_ON_NODE") or os.cpu_count() or 1) // local
    return max(min(per_task, _usable_cpus() // local), 1)


def _usable_cpus() -> int:
    """CPUs this process may run on: Slurm binds tasks to their cores where it can, and
    where it does not (no task/affinity), more threads than cores only spin against
    each other (four ranks of two threads on two cores ran 20 times slower)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def rendezvous(environ: MutableMapping[str, str] | None = None) -> tuple[str, int]:
    """``MASTER_ADDR``/``MASTER_PORT``: as set (torchrun, the batch script), else Slurm's.

    Else the address of the allocation's first node (its ``NodeAddr``, which
    is its name unless Slurm says otherwise) and a port made from the job id
    and restart count, so jobs sharing a node, and a job's next run, do not
    meet on one port. Both are written back to ``environ``.
    """
    env = os.environ if environ is None else environ
    if not env.get("MASTER_ADDR"):
        env["MASTER_ADDR"] = _first_node_address(env.get("SLURM_JOB_NODELIST", ""))
    if not env.get("MASTER_PORT", "").isdigit():
        job = _int(env, "SLURM_JOB_ID") or os.getpid()
        restart = _int(env, "SLURM_RESTART_COUNT") or 0
        env["MASTER_PORT"] = str(20000 + (job * 7 + restart) % 20000)
    return env["MASTER_ADDR"], int(env["MASTER_PORT"])


def _first_node_address(nodelist: str) -> str:
    if not nodelist:
        return "127.0.0.1"
    try:
        names = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.split()  # fmt: skip
        first = names[0]
        shown = subprocess.run(
            ["scontrol", "show", "node", "-o", first],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError, IndexError):
        return nodelist.split(",")[0].split("[")[0]
    for word in shown.split():
        if word.startswith("NodeAddr="):
            return word[len("NodeAddr=") :]
    return first


def init_distributed(rank: World, backend: str | None = None, timeout_s: float = 300.0) -> str:
    """Join the job's process group (see :func:`rendezvous`); the backend used.

    A single process joins nothing. NCCL when this rank has a GPU, else gloo;
    with GPUs each rank takes the device of its local rank.
    """
    import datetime

    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    chosen = backend or ("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(rank.local_rank % torch.cuda.device_count())
    if rank.world_size > 1 and not dist.is_initialized():
        rendezvous()
        dist.init_process_group(
            chosen,
            rank=rank.rank,
            world_size=rank.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    return chosen


def attach(probe: Probe) -> None:
    """End each timed phase with a CUDA synchronisation when this rank has a GPU."""
    import torch

    if torch.cuda.is_available():
        probe.synchronize = torch.cuda.synchronize


def agree_on_notice(probe: Probe) -> bool:
    """True on every rank when any rank has heard hops's notice (one collective).

    Call it at the same point of every iteration on every rank. With one
    process it is :meth:`Probe.preempt_requested` alone.
    """
    heard = probe.preempt_requested()
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return heard
    import torch

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([1.0 if heard else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


def stop_for_notice(probe: Probe, rank: World, save: Callable[[], object]) -> bool:
    """On notice agreed by all ranks: rank 0 saves, all wait for it, the probe reports.

    True when the job checkpointed and should stop training (see
    :func:`wait_for_requeue`); False, at the cost of one collective, otherwise.
    """
    if not agree_on_notice(probe):
        return False
    started = time.perf_counter()
    if rank.is_main:
        save()
    _barrier()
    probe.checkpointed(time.perf_counter() - started)
    return True


def heard_soon(probe: Probe, since: int, within_s: float = 3.0) -> bool:
    """Whether this rank heard a notice signal itself since ``since`` signals, allowing
    for its signal to come late.

    hopsd's signal reaches the nodes of a job a few milliseconds apart: a rank
    may learn of the notice from the others' agreement before its own signal
    is delivered. Asked after the checkpoint, it waits up to ``within_s``.
    """
    end = time.monotonic() + within_s
    while probe.notices_heard <= since and time.monotonic() < end:
        time.sleep(0.05)
    return probe.notices_heard > since


def notice_line(rank: int, world_size: int, heard: str, position: float) -> str:
    """What a rank prints when it stops for a notice: which run, whether it heard the
    signal itself (``heard=yes``, ``late`` once it came after the agreement) or not."""
    run = os.environ.get("SLURM_RESTART_COUNT", "0")
    return (f"notice: run {run} rank {rank}/{world_size} heard={heard} "
            f"stopped at {position:g}; waiting to be requeued")  # fmt: skip


def tell_notice(probe: Probe, rank: int, world_size: int, since: int, position: float) -> int:
    """Print the rank's notice line at once (hopsd requeues within a second of the
    checkpoint): did its own signal come since ``since`` signals; if not yet, a
    second line when it does. The signal count to pass next time."""
    heard = probe.notices_heard > since
    print(notice_line(rank, world_size, "yes" if heard else "no", position), flush=True)
    if not heard and heard_soon(probe, since):
        print(notice_line(rank, world_size, "late", position), flush=True)
    return probe.notices_heard


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def wait_for_requeue(timeout_s: float = 600.0, sleep: Callable[[float], Any] = time.sleep) -> None:
    """Train no further: hopsd requeues the job within its grace and this run ends.

    Returns after ``timeout_s`` should no requeue come (hopsd changed its
    mind, or is down): the checkpoint is where the loop stands, so training on
    from here loses nothing.
    """
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        sleep(min(1.0, max(end - time.monotonic(), 0.0)))


def scaled_lr(base_lr: float, gpus: int, rule: str, base_gpus: int = 1) -> float:
    """The learning rate at ``gpus`` by the job's rule: ``linear``, ``sqrt`` or ``none``.

    With a fixed per-GPU batch the global batch grows with the GPU count;
    ``linear`` scales the rate with it (Goyal et al.), ``sqrt`` with its
    square root. hops's own ``probe.lr`` follows the same rule from
    ``hops submit --lr --lr-scale``.
    """
    ratio = max(gpus, 1) / max(base_gpus, 1)
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    if rule == "none":
        return base_lr
    raise ValueError(f"lr scale rule must be linear, sqrt or none, got {rule!r}")
