"""What hopsd tells a run: its mode file and the environment ``hops submit`` exports.

hopsd leaves ``<spool>/<job id>.mode`` for the run it is about to release
(profile or run, the GPU count it placed the job on, the learning rate for
it); the environment carries the defaults. Both are read defensively: a value
out of range falls back to its default, and a mode file meant for another run,
or one another user could have planted, is ignored. Standard library only,
Python 3.8, as the rest of the probe.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hops_probe.safe_files import _CLOEXEC, _NOFOLLOW

MAX_PROFILE_ITERATIONS = 500
MAX_MODE_BYTES = 4096


def env_int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(env.get(name, "") or default)
    except ValueError:
        return default
    return min(max(value, low), high)


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def read_mode_file(
    path: Path, run: int, owners: frozenset[int] | None = None
) -> dict[str, Any] | None:
    """The control hopsd left for this job, if it is meant for this very run.

    ``{"mode": "profile", "iterations": 20, "run": 1, "gpus": 2, "lr": 0.1}``:
    ``run`` is the restart count the job will have when hopsd releases it, so a
    file left from an earlier placement never puts a later run into profiling.
    A link, a non-regular file or one whose owner is not in ``owners`` (by
    default root and this job's user) is ignored: another user cannot steer
    the job by planting one.
    """
    allowed = owners if owners is not None else frozenset({0, os.geteuid()})
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid not in allowed:
            return None
        if info.st_size > MAX_MODE_BYTES:
            return None
        data = json.loads(os.read(fd, MAX_MODE_BYTES + 1))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("run") != run:
        return None
    return data


def resolve_mode(
    env: Mapping[str, str],
    spool: Path,
    job_id: str,
    run: int,
    control: dict[str, Any] | None = None,
) -> tuple[str, int]:
    """(mode, profiling iterations): the mode file wins over ``HOPS_PROBE_MODE``."""
    mode = env.get("HOPS_PROBE_MODE", "run").strip().lower() or "run"
    iterations = env_int(env, "HOPS_PROBE_ITERATIONS", 20, 1, MAX_PROFILE_ITERATIONS)
    if control is None:
        control = read_mode_file(spool / f"{job_id}.mode", run)
    if control is not None:
        mode = str(control.get("mode", mode)).lower()
        raw = control.get("iterations")
        if isinstance(raw, int) and not isinstance(raw, bool):
            iterations = min(max(raw, 1), MAX_PROFILE_ITERATIONS)
    if mode not in ("profile", "run", "off"):
        mode = "run"
    return mode, iterations


def positive(control: Mapping[str, Any] | None, key: str) -> float | None:
    value = (control or {}).get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e12:
        return value
    return None
