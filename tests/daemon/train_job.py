#!/usr/bin/env python3
"""A stand-in training job for the hops test cluster.

It does no real work: it sleeps per iteration as long as a job of the given
per-GPU rate would take on the GPUs Slurm gave it, so hops sees realistic
heterogeneity. The rate is ``base * type_speed * node_speed`` where the type
speed comes from ``--type-speed`` (default table below) and the node speed from
``$HOPS_CLUSTER_DIR/node-speed.json``; a distributed run goes at the pace of
its slowest node. Progress is checkpointed every iteration, so a requeued run
resumes where it stopped, and reported to ``$HOPS_SPOOL_DIR/<jobid>.progress.json``
(the daemon's spool). Every run start and the completion are appended to
``<jobid>.events`` so tests can check that a job finished exactly once.

Each iteration goes through the phases of a real trainer (data, forward,
backward, update) under the hops probe (:mod:`hops_probe`), which reports
per-phase times and progress to ``<jobid>.jsonl`` and profiles the job when
hopsd asks for it. ``--node-sensitivity`` sets how much the job suffers on a
slower server (1: fully, like a data-loading-bound job; 0: not at all);
``--data-miss`` makes a share of the batches miss the cache and load
``--miss-factor`` times slower; ``--no-probe`` and ``--progress-only`` stand
for jobs without the probe or with progress reports only.

On hops's notice before a move or preemption (SIGUSR1) the job checkpoints at
once, tells hopsd (``probe.checkpointed()``) and then waits, training no
further, until it is requeued (at most ``--notice-wait`` seconds): nothing it
does is lost. ``--ignore-notice`` stands for a job that does not cooperate, and
``--checkpoint-every`` makes checkpoints rarer (a long-running real trainer).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_TYPE_SPEED = {"k80": 1.0, "v100": 2.0, "a100": 4.0}
MAX_SLEEP_S = 0.25
CHECKPOINT_EVERY_S = 0.25
# Share of an iteration each phase takes (data loaded in the loop, pattern 2).
PHASE_SHARES = (("data", 0.15), ("forward", 0.3), ("backward", 0.45), ("update", 0.1))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=float, required=True, help="total samples to process")
    parser.add_argument("--batch", type=int, default=32, help="per-GPU batch size")
    parser.add_argument("--base", type=float, default=100.0, help="per-GPU samples/s at speed 1")
    parser.add_argument(
        "--type-speed", default="", help="per-type speed factors, e.g. a100=4,v100=2"
    )
    parser.add_argument("--node-sensitivity", type=float, default=1.0)
    parser.add_argument("--data-miss", type=float, default=0.0, help="cache-miss probability")
    parser.add_argument("--miss-factor", type=float, default=4.0)
    parser.add_argument("--no-probe", action="store_true", help="run without the hops probe")
    parser.add_argument("--progress-only", action="store_true", help="report progress only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-every", type=float, default=CHECKPOINT_EVERY_S)
    parser.add_argument("--ignore-notice", action="store_true", help="never checkpoint on notice")
    parser.add_argument("--notice-wait", type=float, default=60.0, help="wait after a notice")
    return parser.parse_args(argv)


def type_speeds(spec: str) -> dict[str, float]:
    speeds = dict(DEFAULT_TYPE_SPEED)
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        speeds[name.strip()] = float(value)
    return speeds


def expand_nodes(nodelist: str) -> list[str]:
    try:
        import hostlist

        return list(hostlist.expand_hostlist(nodelist))
    except ImportError:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
        )
        return out.stdout.split()


def node_speed(nodes: list[str]) -> float:
    cluster_dir = os.environ.get("HOPS_CLUSTER_DIR", "")
    path = Path(cluster_dir) / "node-speed.json"
    table = json.loads(path.read_text()) if cluster_dir and path.exists() else {}
    return min(float(table.get(n, 1.0)) for n in nodes)


def gpu_type(node: str, known: dict[str, float]) -> str:
    """The node's GPU type: the partition (one type per partition), else its typed GRES.

    The partition comes from the job's environment, so a run does not depend on
    slurmctld answering; ``scontrol show node`` (``gpu:a100:4`` -> ``a100``) is
    the fallback for partitions not named after a type.
    """
    if os.environ.get("HOPS_GPU_TYPE"):
        return os.environ["HOPS_GPU_TYPE"]
    partition = os.environ.get("SLURM_JOB_PARTITION", "")
    if partition in known:
        return partition
    out = subprocess.run(
        ["scontrol", "show", "node", "-o", node], capture_output=True, text=True, check=False
    )
    for field in out.stdout.split():
        if field.startswith("Gres=gpu:"):
            parts = field[len("Gres=") :].split(":")
            if len(parts) >= 3:
                return parts[1]
    return "unknown"


def gpu_count(n_nodes: int) -> int:
    if os.environ.get("SLURM_GPUS"):
        return int(os.environ["SLURM_GPUS"])
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
    return max(len(visible), 1) * n_nodes


def write_json(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def append_event(path: Path, data: dict[str, object]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(data) + "\n")


def make_probe(args: argparse.Namespace) -> Any:
    """The hops probe, importable from an installed hops or from this checkout."""
    if args.no_probe:
        return None
    os.environ.setdefault("HOPS_PROBE_FLUSH_S", "1.0")
    try:
        from hops_probe import Probe
    except ImportError:
        # a Python without hops installed (the Slurm 24.11 root's): the checkout's probe/
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "probe"))
        from hops_probe import Probe
    return Probe()


def run_iterations(
    args: argparse.Namespace, probe: Any, n_iter: int, iteration_s: float, step: int, rng: Any
) -> None:
    """Sleep like ``n_iter`` training iterations, phase by phase under the probe."""
    if probe is None or args.progress_only:
        time.sleep(n_iter * iteration_s)
        return
    for _ in range(n_iter):
        with probe.iteration(samples=step) as it:
            for phase, share in PHASE_SHARES:
                seconds = share * iteration_s
                if phase == "data" and args.data_miss > 0 and rng.random() < args.data_miss:
                    seconds *= args.miss_factor
                with it.phase(phase):
                    time.sleep(seconds)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    job_id = os.environ.get("SLURM_JOB_ID", "local")
    spool = Path(os.environ.get("HOPS_SPOOL_DIR") or os.getcwd())
    spool.mkdir(parents=True, exist_ok=True)
    ckpt = spool / f"{job_id}.ckpt.json"
    progress = spool / f"{job_id}.progress.json"
    events = spool / f"{job_id}.events"

    nodes = expand_nodes(os.environ.get("SLURM_JOB_NODELIST", "localhost"))
    speeds = type_speeds(args.type_speed)
    kind = gpu_type(nodes[0], speeds)
    gpus = gpu_count(len(nodes))
    per_gpu = args.base * speeds.get(kind, 1.0) * node_speed(nodes) ** args.node_sensitivity
    done = float(json.loads(ckpt.read_text())["samples_done"]) if ckpt.exists() else 0.0
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    run = {"nodes": nodes, "gpu_type": kind, "gpus": gpus, "restarts": restarts}
    append_event(events, {"event": "start", "at": time.time(), "samples_done": done, **run})

    step = args.batch * gpus
    iteration_s = args.batch / per_gpu
    probe = make_probe(args)
    rng = random.Random(args.seed + restarts)
    last_report = last_ckpt = 0.0
    while done < args.samples:
        # Sleep a whole number of iterations, at most MAX_SLEEP_S, to stay responsive.
        n_iter = max(1, int(MAX_SLEEP_S / iteration_s))
        run_iterations(args, probe, n_iter, iteration_s, step, rng)
        done = min(args.samples, done + n_iter * step)
        now = time.time()
        if probe is not None:
            probe.progress(done)
        if probe is not None and not args.ignore_notice and probe.preempt_requested():
            write_json(ckpt, {"samples_done": done})
            probe.checkpointed()
            append_event(events, {"event": "checkpoint", "at": time.time(), "samples_done": done})
            time.sleep(args.notice_wait)  # requeued meanwhile: this process ends here
            last_ckpt = time.time()
        if now - last_ckpt >= args.checkpoint_every or done >= args.samples:
            write_json(ckpt, {"samples_done": done})
            last_ckpt = now
        if now - last_report >= 0.5 or done >= args.samples:
            write_json(progress, {"samples_done": done, "per_gpu": per_gpu, "at": now, **run})
            last_report = now
    if probe is not None:
        probe.close()
    append_event(events, {"event": "done", "at": time.time(), "samples_done": done, **run})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
