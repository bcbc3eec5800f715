"""CSV trace import and export.

Format (header row required, column order free, extra columns rejected)::

    job_id,submit_time_s,demands,total_samples,model,user,batch_size
    j0001,0,1|2|4,1200000,resnet50,alice,32

``demands`` lists the acceptable GPU counts separated by ``|`` (strictly
increasing); ``job_id`` (default ``line<N>``), ``user`` and ``batch_size``
(default: the model's) are optional. Every error names the file and line.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

from hopsd.core.errors import HopsError, InvalidInputError
from hopsd.sim.workload import JobSpec

REQUIRED = ("submit_time_s", "demands", "total_samples", "model")
OPTIONAL = ("job_id", "user", "batch_size")
COLUMNS = ("job_id", "submit_time_s", "demands", "total_samples", "model", "user", "batch_size")


class TraceError(InvalidInputError):
    """A trace row that cannot describe a job."""


def _float(where: str, name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{where}: {name} {text!r} is not a number") from None


def _demands(where: str, text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split("|")]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise TraceError(
            f"{where}: demands {text!r} must be GPU counts separated by '|', e.g. 1|2|4"
        ) from None
    if not values or any(v <= 0 for v in values) or list(values) != sorted(set(values)):
        raise TraceError(f"{where}: demands {text!r} must be positive and strictly increasing")
    return values


def _row_to_job(
    where: str, row: Mapping[str, str], line: int, known_models: set[str] | None
) -> JobSpec:
    for key in REQUIRED:
        if not (row.get(key) or "").strip():
            raise TraceError(f"{where}: missing value for {key!r}")
    model = row["model"].strip()
    if known_models is not None and model not in known_models:
        raise TraceError(
            f"{where}: unknown model {model!r}; known: {', '.join(sorted(known_models))}"
        )
    batch_text = (row.get("batch_size") or "").strip()
    batch: int | None = None
    if batch_text:
        try:
            batch = int(batch_text)
        except ValueError:
            raise TraceError(f"{where}: batch_size {batch_text!r} is not an integer") from None
    try:
        return JobSpec(
            job_id=(row.get("job_id") or "").strip() or f"line{line}",
            submit_time=_float(where, "submit_time_s", row["submit_time_s"]),
            demands=_demands(where, row["demands"]),
            total_samples=_float(where, "total_samples", row["total_samples"]),
            model=model,
            user=(row.get("user") or "").strip(),
            batch_size=batch,
        )
    except TraceError:
        raise
    except HopsError as exc:
        raise TraceError(f"{where}: {exc}") from exc


def read_trace(path: str | Path, known_models: Iterable[str] | None = None) -> list[JobSpec]:
    """Parse a trace CSV; jobs come back sorted by submit time (stable)."""
    p = Path(path)
    models = set(known_models) if known_models is not None else None
    try:
        handle = p.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror}") from exc
    with handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise TraceError(f"{p} line 1: header lacks column(s) {missing}; expected {COLUMNS}")
        extra = [c for c in header if c not in COLUMNS]
        if extra:
            raise TraceError(f"{p} line 1: unknown column(s) {extra}; expected {COLUMNS}")
        reader.fieldnames = header
        jobs: list[JobSpec] = []
        seen: set[str] = set()
        for row in reader:
            line = reader.line_num
            where = f"{p} line {line}"
            if None in row:
                raise TraceError(f"{where}: more fields than the header has")
            job = _row_to_job(where, row, line, models)
            if job.job_id in seen:
                raise TraceError(f"{where}: job_id {job.job_id!r} appears twice")
            seen.add(job.job_id)
            jobs.append(job)
    if not jobs:
        raise TraceError(f"{p}: the trace holds no jobs")
    return sorted(jobs, key=lambda j: j.submit_time)


def write_trace(path: str | Path, jobs: Iterable[JobSpec]) -> None:
    """Write jobs in the format :func:`read_trace` reads."""
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for j in jobs:
            writer.writerow(
                [
                    j.job_id,
                    repr(j.submit_time),
                    "|".join(str(d) for d in j.demands),
                    repr(j.total_samples),
                    j.model,
                    j.user,
                    "" if j.batch_size is None else j.batch_size,
                ]
            )
