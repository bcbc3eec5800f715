"""What ``hops submit`` puts in the job's environment, and the ``--export`` that carries it.

Slurm cannot change a queued job's environment, so everything the job needs at
every start is given at submission: where its probe writes (``HOPS_SPOOL_DIR``,
the user's own directory in hopsd's spool, which hopsd makes before it releases
the job), its size (``HOPS_TOTAL_SAMPLES``) and per-GPU batch
(``HOPS_BATCH_SIZE``), and the signal of hops's checkpoint notice
(``HOPS_NOTICE_SIGNAL``) when hops.conf gives one. What changes between
starts (GPU count, learning rate) the probe reads from the mode file hopsd
writes before each release.

The user's own ``--export`` (command line or ``#SBATCH``) is kept: hops adds its
variables to it, and the one ``--export`` it passes comes last, so it wins.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping, Sequence
from pathlib import Path


def current_user() -> str:
    """The submitting user: the job runs as them, so their spool directory is the job's."""
    return pwd.getpwuid(os.getuid()).pw_name


def job_environment(
    spool_dir: str, total_samples: float, batch_size: int, notice_signal: str = ""
) -> dict[str, str]:
    """The variables a hops job gets (no spool directory when hops.conf names none).

    ``notice_signal`` is the signal hopsd sends before a move (the probe catches it).
    """
    env = {"HOPS_TOTAL_SAMPLES": f"{total_samples:g}", "HOPS_BATCH_SIZE": str(batch_size)}
    if notice_signal:
        env["HOPS_NOTICE_SIGNAL"] = notice_signal.removeprefix("SIG")
    if spool_dir:
        env["HOPS_SPOOL_DIR"] = str(Path(spool_dir) / current_user())
    return env


def user_export(options: Sequence[str]) -> str | None:
    """The value of the last ``--export`` in ``options`` (None when absent)."""
    value: str | None = None
    for i, option in enumerate(options):
        if option.startswith("--export="):
            value = option.split("=", 1)[1]
        elif option == "--export" and i + 1 < len(options):
            value = options[i + 1]
    return value


def without_export(options: Sequence[str]) -> list[str]:
    """``options`` without any ``--export`` (hops passes the merged one)."""
    out: list[str] = []
    skip = False
    for option in options:
        if skip:
            skip = False
        elif option == "--export":
            skip = True
        elif not option.startswith("--export="):
            out.append(option)
    return out


def export_option(env: Mapping[str, str], theirs: str | None) -> str:
    """One ``--export`` with the user's choice (ALL, NONE or a list) plus hops's variables."""
    ours = ",".join(f"{k}={v}" for k, v in sorted(env.items()))
    base = (theirs or "ALL").strip()
    if base.upper() == "NONE":
        return f"--export={ours}"  # a list without ALL exports only those (and SLURM_*)
    return f"--export={base},{ours}"
