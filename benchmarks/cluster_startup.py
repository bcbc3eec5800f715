"""How long the Slurm test cluster takes to come up: native 22.05, 24.11 from its root, container.

Baseline measured in the same run: the native `docker/cluster.sh up` on the
host's own Slurm. Then, each on its own port and state directory:
`HOPS_SLURM=24.11 up` (Debian trixie root), and `up --container` (22.05 image),
each followed by `down`. With ``--cold`` the debootstrap roots and the Docker
images are made from nothing in scratch caches (HOPS_ROOTFS_CACHE and
HOPS_DOCKER_DIR under /var/tmp, removed afterwards), so the figures include
debootstrap and the image build; without it the caches of earlier runs serve.
Needs root and no engine already answering on DOCKER_HOST or the system socket
for the cold run (it must start its own).

    .venv/bin/python benchmarks/cluster_startup.py [--port 7417] [--cold] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLUSTER_SH = Path(__file__).resolve().parents[1] / "docker" / "cluster.sh"


def timed(env: dict[str, str], *args: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(CLUSTER_SH), *args], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"cluster.sh {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def measure(name: str, env: dict[str, str], up_args: tuple[str, ...]) -> dict[str, float]:
    up = timed(env, "up", *up_args)
    down = timed(env, "down")
    again = timed(env, "up", *up_args)  # everything cached now
    timed(env, "down")
    print(f"{name:28s} up {up:6.1f} s   down {down:5.1f} s   up again {again:5.1f} s")
    return {"up_s": up, "down_s": down, "up_again_s": again}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=7417, help="first of three port bases")
    parser.add_argument("--cold", action="store_true", help="scratch caches: include builds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the test cluster runs as root)")
    scratch = Path(tempfile.mkdtemp(prefix="hops-bench-", dir="/var/tmp"))
    base = {k: v for k, v in os.environ.items() if k not in ("HOPS_SLURM", "SLURM_CONF")}
    if args.cold:
        base["HOPS_ROOTFS_CACHE"] = str(scratch / "rootfs")
        base["HOPS_DOCKER_DIR"] = str(scratch / "docker")
        base.pop("DOCKER_HOST", None)
    runs = {
        "native 22.05 (baseline)": ({"HOPS_CLUSTER_PORT": str(args.port)}, ()),
        "24.11 from its root": ({"HOPS_CLUSTER_PORT": str(args.port + 100)}, ()),
        "container 22.05": ({"HOPS_CLUSTER_PORT": str(args.port + 200)}, ("--container",)),
    }
    results: dict[str, dict[str, float]] = {}
    try:
        for i, (name, (extra, up_args)) in enumerate(runs.items()):
            env = {**base, **extra, "HOPS_CLUSTER_DIR": str(scratch / f"cluster{i}")}
            if name.startswith("24.11"):
                env["HOPS_SLURM"] = "24.11"
            results[name] = measure(name, env, up_args)
    finally:
        mounts = subprocess.run(
            ["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True, check=False
        ).stdout.split()
        if any(m.startswith(f"{scratch}/") for m in mounts):  # never delete through a bind mount
            print(f"left {scratch} in place: something is still mounted below it", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    baseline = results["native 22.05 (baseline)"]["up_again_s"]
    for name, figures in results.items():
        figures["ratio_up_again_vs_native"] = figures["up_again_s"] / baseline
        print(f"{name:28s} cached up / native up: {figures['ratio_up_again_vs_native']:.1f}x")
    if args.json:
        print(json.dumps({"cold": args.cold, "results": results}, indent=2))


if __name__ == "__main__":
    main()
