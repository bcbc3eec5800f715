"""Slurm's own commands as the live tests and the fixture recorders type them."""

from __future__ import annotations

import subprocess


def sbatch(*args: str) -> int:
    """Submit, output to /dev/null unless the job names its own (a later ``-o`` wins)."""
    done = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=20,
    )
    return int(done.stdout.strip().split(";")[0])


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], capture_output=True, text=True, check=True, timeout=20)
