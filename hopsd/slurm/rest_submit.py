"""A batch script and sbatch options as slurmrestd's job description.

slurmrestd takes the script's text and a JSON job description; it does not
read the script's ``#SBATCH`` lines (checked on 24.11.5: a ``#SBATCH -J``
name was ignored). So the options hops users give — in the script and after
``--`` — are translated here, script first and command line last, as sbatch
lets the command line win. An option outside the known set is refused with
its name rather than dropped, so a job never runs with less than was asked.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from hopsd.slurm.errors import SubmitArgumentError

MAX_SCRIPT_BYTES = 4 * 1024 * 1024
# option -> (job description field, kind); short options map to long ones.
_FIELDS: dict[str, tuple[str, str]] = {
    "--job-name": ("name", "text"),
    "--output": ("standard_output", "text"),
    "--error": ("standard_error", "text"),
    "--input": ("standard_input", "text"),
    "--partition": ("partition", "text"),
    "--account": ("account", "text"),
    "--qos": ("qos", "text"),
    "--chdir": ("current_working_directory", "text"),
    "--constraint": ("constraints", "text"),
    "--dependency": ("dependency", "text"),
    "--reservation": ("reservation", "text"),
    "--wckey": ("wckey", "text"),
    "--time": ("time_limit", "minutes"),
    "--nodes": ("minimum_nodes", "int"),
    "--ntasks": ("tasks", "int"),
    "--ntasks-per-node": ("tasks_per_node", "int"),
    "--cpus-per-task": ("cpus_per_task", "int"),
    "--nice": ("nice", "int"),
    "--mem": ("memory_per_node", "megabytes"),
    "--mem-per-cpu": ("memory_per_cpu", "megabytes"),
    "--open-mode": ("open_mode", "open_mode"),
    "--export": ("environment", "export"),
    "--signal": ("kill_warning_signal", "signal"),
}
_SHORT = {
    "-J": "--job-name",
    "-o": "--output",
    "-e": "--error",
    "-i": "--input",
    "-p": "--partition",
    "-A": "--account",
    "-q": "--qos",
    "-D": "--chdir",
    "-C": "--constraint",
    "-d": "--dependency",
    "-t": "--time",
    "-N": "--nodes",
    "-n": "--ntasks",
    "-c": "--cpus-per-task",
}
_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_SIGNAL_RE = re.compile(r"^(B:)?([A-Z0-9]+)(?:@(\d+))?$")
_MEM_RE = re.compile(r"^(\d+)([KMGT]?)$", re.IGNORECASE)


def sbatch_directives(script: str) -> list[str]:
    """The options of a script's ``#SBATCH`` lines, in order (sbatch stops at the first command)."""
    options: list[str] = []
    for line in script.splitlines()[1:]:
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break
        body = stripped[len("#SBATCH") :].split("#", 1)[0]
        options += shlex.split(body)
    return options


def job_description(
    script: str,
    options: Sequence[str],
    *,
    environ: Mapping[str, str],
    cwd: str,
) -> dict[str, Any]:
    """The ``job`` object for ``POST .../job/submit``: defaults, then ``#SBATCH``, then ``options``.

    Defaults follow sbatch: the caller's working directory and its whole
    environment (``--export=ALL``).
    """
    if len(script.encode()) > MAX_SCRIPT_BYTES:
        raise SubmitArgumentError(f"batch script larger than {MAX_SCRIPT_BYTES} bytes")
    if not script.startswith("#!"):
        raise SubmitArgumentError("a batch script must start with '#!' (as sbatch requires)")
    job: dict[str, Any] = {
        "script": script,
        "current_working_directory": cwd,
        "environment": _environment("ALL", environ),
    }
    for option, value in _pairs([*sbatch_directives(script), *options]):
        field, kind = _FIELDS[option]
        if kind == "signal":
            job.update(_signal(option, value))
        else:
            job[field] = _convert(option, kind, value, environ)
    return job


def _pairs(args: Sequence[str]) -> list[tuple[str, str]]:
    """``(--long-option, value)`` pairs of sbatch-style arguments."""
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            option, sep, value = arg.partition("=")
        elif arg.startswith("-") and len(arg) >= 2:
            option, sep, value = _SHORT.get(arg[:2], arg[:2]), "", arg[2:]
            sep = "=" if value else ""
        else:
            raise SubmitArgumentError(f"unexpected argument {arg!r} (the script is given apart)")
        if option not in _FIELDS:
            raise SubmitArgumentError(
                f"sbatch option {option!r} is not supported by the REST backend "
                f"(supported: {', '.join(sorted(_FIELDS))})"
            )
        if not sep:
            if i + 1 >= len(args):
                raise SubmitArgumentError(f"sbatch option {option!r} needs a value")
            i += 1
            value = args[i]
        pairs.append((option, value))
        i += 1
    return pairs


def _convert(option: str, kind: str, value: str, environ: Mapping[str, str]) -> Any:
    if kind == "text":
        return value
    if kind == "int":
        if not re.fullmatch(r"-?\d+", value):
            raise SubmitArgumentError(f"{option}: expected a whole number, got {value!r}")
        return int(value)
    if kind == "minutes":
        return {"set": True, "infinite": False, "number": time_minutes(value)}
    if kind == "megabytes":
        return {"set": True, "infinite": False, "number": _megabytes(option, value)}
    if kind == "open_mode":
        if value not in ("append", "truncate"):
            raise SubmitArgumentError(f"{option}: expected append or truncate, got {value!r}")
        return [value.upper()]
    return _environment(value, environ)


def time_minutes(value: str) -> int:
    """sbatch's ``--time`` (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``)
    in minutes, rounded up."""
    match = _TIME_RE.match(value.strip())
    if not match:
        raise SubmitArgumentError(f"--time: cannot read {value!r}")
    days, first, second, third = match.groups()
    if days is not None:
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
        total_s = ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    elif third is not None:
        total_s = (int(first) * 60 + int(second)) * 60 + int(third)
    elif second is not None:
        total_s = int(first) * 60 + int(second)
    else:
        total_s = int(first) * 60
    return max(1, -(-total_s // 60))


def _megabytes(option: str, value: str) -> int:
    match = _MEM_RE.match(value.strip())
    if not match:
        raise SubmitArgumentError(f"{option}: cannot read {value!r}")
    factor = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[match[2].upper()]
    return max(1, int(int(match[1]) * factor))


def _environment(spec: str, environ: Mapping[str, str]) -> list[str]:
    """``--export``: ``ALL``, ``NONE`` or ``ALL,VAR=value,...``/``VAR,...`` as ``K=V`` strings."""
    words = [w for w in spec.split(",") if w]
    base = dict(environ) if not words or words[0] == "ALL" else {}
    for word in words:
        if word in ("ALL", "NONE"):
            continue
        name, sep, value = word.partition("=")
        if sep:
            base[name] = value
        elif name in environ:
            base[name] = environ[name]
    if not base:  # Slurm requires at least one variable
        base = {"PATH": environ.get("PATH", os.defpath)}
    return [f"{k}={v}" for k, v in sorted(base.items())]


def _signal(option: str, value: str) -> dict[str, Any]:
    """``--signal=[B:]SIG[@seconds]`` as the kill-warning fields (sbatch's default is 60 s)."""
    match = _SIGNAL_RE.match(value.strip().upper())
    if not match:
        raise SubmitArgumentError(f"{option}: cannot read {value!r}")
    name = match[2] if match[2].isdigit() or match[2].startswith("SIG") else f"SIG{match[2]}"
    return {
        "kill_warning_signal": name,
        "kill_warning_delay": {"set": True, "infinite": False, "number": int(match[3] or 60)},
        "kill_warning_flags": ["BATCH_JOB"] if match[1] else [],
    }
