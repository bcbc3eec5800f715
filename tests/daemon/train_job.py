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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_TYPE_SPEED = {"k80": 1.0, "v100": 2.0, "a100": 4.0}
MAX_SLEEP_S = 0.25


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=float, required=True, help="total samples to process")
    parser.add_argument("--batch", type=int, default=32, help="per-GPU batch size")
    parser.add_argument("--base", type=float, default=100.0, help="per-GPU samples/s at speed 1")
    parser.add_argument(
        "--type-speed", default="", help="per-type speed factors, e.g. a100=4,v100=2"
    )
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
    per_gpu = args.base * speeds.get(kind, 1.0) * node_speed(nodes)
    done = float(json.loads(ckpt.read_text())["samples_done"]) if ckpt.exists() else 0.0
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    run = {"nodes": nodes, "gpu_type": kind, "gpus": gpus, "restarts": restarts}
    append_event(events, {"event": "start", "at": time.time(), "samples_done": done, **run})

    step = args.batch * gpus
    iteration_s = args.batch / per_gpu
    last_report = 0.0
    while done < args.samples:
        # Sleep a whole number of iterations, at most MAX_SLEEP_S, to stay responsive.
        n_iter = max(1, int(MAX_SLEEP_S / iteration_s))
        time.sleep(n_iter * iteration_s)
        done = min(args.samples, done + n_iter * step)
        write_json(ckpt, {"samples_done": done})
        now = time.time()
        if now - last_report >= 0.5 or done >= args.samples:
            write_json(progress, {"samples_done": done, "per_gpu": per_gpu, "at": now, **run})
            last_report = now
    append_event(events, {"event": "done", "at": time.time(), "samples_done": done, **run})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
