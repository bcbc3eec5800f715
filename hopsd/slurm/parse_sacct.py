"""Accounting records from ``sacct -X --parsable2`` (header line, ``|``-separated).

``--parsable2`` is stable across releases, unlike sacct's JSON, and carries
no free text once the field list avoids names and comments. Times are local
(``2026-11-29T15:42:23``) as sacct prints them for the caller's time zone.
"""

from __future__ import annotations

from datetime import datetime

import hostlist

from hopsd.slurm import gres
from hopsd.slurm.errors import SlurmParseError
from hopsd.slurm.port import AccountingRecord, RunRecord

SACCT_FIELDS = (
    "JobIDRaw",
    "State",
    "ExitCode",
    "Start",
    "End",
    "ElapsedRaw",
    "NodeList",
    "AllocTRES",
    "Partition",
    "User",
)


def parse_accounting(text: str) -> list[AccountingRecord]:
    """One record per job id (the last line wins: sacct lists a job's latest run last)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split("|")
    missing = [f for f in ("JobIDRaw", "State") if f not in header]
    if missing:
        raise SlurmParseError(f"sacct output lacks columns {missing}: {lines[0]!r}")
    by_id: dict[int, AccountingRecord] = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        record = _record(row)
        if record is not None:
            by_id[record.job_id] = record
    return [by_id[i] for i in sorted(by_id)]


RUN_FIELDS = ("JobIDRaw", "State", "ExitCode", "Start", "End")


def parse_runs(text: str) -> list[RunRecord]:
    """Runs from ``sacct -D --parsable2`` *with* steps, in the order sacct lists them.

    With ``-D`` sacct prints every run of a job (each requeue starts a new one),
    each followed by its steps; the ``<id>.batch`` line after a run's own line is
    that run's batch script.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split("|")
    missing = [f for f in RUN_FIELDS if f not in header]
    if missing:
        raise SlurmParseError(f"sacct output lacks columns {missing}: {lines[0]!r}")
    runs: list[RunRecord] = []
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        raw_id = row.get("JobIDRaw", "")
        state = (row.get("State", "").split() or ["UNKNOWN"])[0]
        code, sig = _exit(row.get("ExitCode", "0:0"))
        start, end = parse_local_time(row.get("Start", "")), parse_local_time(row.get("End", ""))
        if raw_id.isdigit():
            runs.append(RunRecord(int(raw_id), state, start, end))
            continue
        job, _, step = raw_id.partition(".")
        if step == "batch" and runs and str(runs[-1].job_id) == job:
            last = runs[-1]
            runs[-1] = RunRecord(
                last.job_id, last.state, last.start_time, last.end_time, state, code, sig, end
            )
    return runs


def _exit(value: str) -> tuple[int, int]:
    code, _, sig = value.partition(":")
    return (int(code) if code.isdigit() else 0, int(sig) if sig.isdigit() else 0)


def parse_local_time(value: str) -> float | None:
    """Epoch seconds of sacct/scontrol local time; ``None`` for Unknown/None/empty."""
    value = value.strip()
    if not value or value in ("Unknown", "None", "N/A"):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _record(row: dict[str, str]) -> AccountingRecord | None:
    raw_id = row.get("JobIDRaw", "")
    if not raw_id.isdigit():  # steps (123.batch) and array forms are not jobs
        return None
    code, _, sig = row.get("ExitCode", "0:0").partition(":")
    nodes = row.get("NodeList", "")
    elapsed = row.get("ElapsedRaw", "0")
    return AccountingRecord(
        job_id=int(raw_id),
        state=(row.get("State", "").split() or ["UNKNOWN"])[0],
        exit_code=int(code) if code.isdigit() else 0,
        signal=int(sig) if sig.isdigit() else 0,
        start_time=parse_local_time(row.get("Start", "")),
        end_time=parse_local_time(row.get("End", "")),
        elapsed_s=int(elapsed) if elapsed.isdigit() else 0,
        nodes=_expand(nodes),
        alloc_tres=gres.tres_dict(row.get("AllocTRES", "")),
        partition=row.get("Partition", ""),
        user=row.get("User", ""),
    )


def _expand(nodes: str) -> tuple[str, ...]:
    if not nodes or nodes in ("None assigned", "(null)"):
        return ()
    return tuple(hostlist.expand_hostlist(nodes))
