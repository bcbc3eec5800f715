"""What a job reports about itself, and the checks a report passes before hopsd reads it.

Two formats reach hopsd from a job: the probe's JSON lines (``run``,
``profile``, ``checkpoint`` and ``start`` records, :func:`parse_line`) and
the single progress file of a job without the probe (:func:`parse_progress`).
Both are user input: each is bounded in size and depth, has a closed set of
keys and finite values in range, or is refused with the reason
(:class:`~hopsd.userdata.UserDataError`). :mod:`hopsd.daemon.sensing` reads
the files and learns from what passes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from hopsd.core.fitting import PhaseMeans
from hopsd.daemon.spool_budget import MAX_PROGRESS_BYTES
from hopsd.userdata import (
    JsonLimits,
    UserDataError,
    check_keys,
    finite,
    integer,
    load_json,
    number_list,
    short_text,
)

MAX_LINE_BYTES = 16 * 1024
MAX_LIST = 1024
MAX_TIME_S = 86_400.0


@dataclass(frozen=True)
class ReportHead:
    """What every probe record says, whatever its kind: which run, where, when, how far.

    The fields :func:`parse_record` checks once for all kinds; each report adds
    its kind's own after them.
    """

    run: int
    node: str
    at: float
    samples_done: float | None


@dataclass(frozen=True)
class IterationsReport(ReportHead):
    """Iterations measured, with each one's data wait (``t_d``) and sync wait (``t_w``)."""

    iterations: int
    t_d: tuple[float, ...]
    t_w: tuple[float, ...]


@dataclass(frozen=True)
class ProfileReport(IterationsReport):
    samples_per_iter: float
    means: PhaseMeans


@dataclass(frozen=True)
class RunReport(IterationsReport):
    samples: float
    seconds: float


@dataclass(frozen=True)
class CheckpointReport(ReportHead):
    """The job saved a checkpoint (``probe.checkpointed()``), taking ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class StartReport(ReportHead):
    """A run's time from its start to its first iteration (its share of a restart's cost)."""

    startup_s: float


Report = ProfileReport | RunReport | CheckpointReport | StartReport


class BadRecord(UserDataError):
    """A line that is not a believable probe record."""


_COMMON_KEYS = frozenset({"v", "job", "run", "node", "seq", "at", "samples_done", "kind", "loader"})
_RUN_KEYS = _COMMON_KEYS | {"iterations", "samples", "seconds", "busy_s", "t_d", "t_w"}
_RUN_KEYS |= {"t_d_sum", "t_w_sum"}
_PROFILE_KEYS = _COMMON_KEYS | {"iterations", "samples_per_iter", "t_iter", "t_f", "t_b", "t_u"}
_PROFILE_KEYS |= {"t_d_wait", "t_d", "t_w"}
# One closed set for all kinds: every key the probe writes in any record.
_RECORD_KEYS = _RUN_KEYS | _PROFILE_KEYS | {"startup_s"}
_KINDS = ("run", "profile", "checkpoint", "start")
_RECORD_JSON = JsonLimits(max_bytes=MAX_LINE_BYTES, max_depth=2, max_values=3 * MAX_LIST)


def _num(record: dict[str, Any], key: str, high: float, *, optional: bool = False) -> float:
    value = record.get(key)
    if value is None and optional:
        return math.nan
    return finite(value, 0.0, high, key)


def _int(record: dict[str, Any], key: str, high: int) -> int:
    return integer(record.get(key), 0, high, key)


def _times(record: dict[str, Any], key: str) -> tuple[float, ...]:
    return number_list(record.get(key, []), MAX_LIST, MAX_TIME_S, key)


def parse_line(line: bytes, slurm_id: int) -> Report:
    """One report line, bounded before it is decoded (:mod:`hopsd.userdata`)."""
    return parse_record(load_json(line, _RECORD_JSON, "report line"), slurm_id)


def parse_record(record: object, slurm_id: int) -> Report:
    """A typed report from one decoded line, or :class:`BadRecord` saying why not."""
    if not isinstance(record, dict):
        raise BadRecord("not a JSON object")
    if record.get("v") != 1:
        raise BadRecord("unknown format version")
    if str(record.get("job"))[:32] != str(slurm_id):
        raise BadRecord(f"claims job {str(record.get('job'))[:32]!r}, file belongs to {slurm_id}")
    kind = record.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise BadRecord(f"unknown kind {str(kind)[:32]!r}")
    check_keys(record, _RECORD_KEYS, f"{kind} record")
    node = record.get("node")
    if not isinstance(node, str) or not 0 < len(node) <= 128:
        raise BadRecord("node is not a short string")
    run = _int(record, "run", 1_000_000)
    at = _num(record, "at", 1e11)
    done = _num(record, "samples_done", 1e15, optional=True)
    head = (run, node, at, None if math.isnan(done) else done)
    if kind == "profile":
        iterations = _int(record, "iterations", 100_000)
        if iterations == 0:
            raise BadRecord("a profile of zero iterations")
        means = PhaseMeans(
            t_iter=_num(record, "t_iter", MAX_TIME_S),
            t_d=_num(record, "t_d_wait", MAX_TIME_S),
            t_f=_num(record, "t_f", MAX_TIME_S),
            t_b=_num(record, "t_b", MAX_TIME_S),
            t_u=_num(record, "t_u", MAX_TIME_S),
            t_w=0.0,
        )
        t_d, t_w = _times(record, "t_d"), _times(record, "t_w")
        means = replace(means, t_w=sum(t_w) / len(t_w) if t_w else 0.0)
        if t_d:
            means = replace(means, t_d=sum(t_d) / len(t_d))
        if means.t_iter <= 0:
            raise BadRecord("a profile with no iteration time")
        spi = _num(record, "samples_per_iter", 1e9)
        return ProfileReport(*head, iterations, t_d, t_w, spi, means)
    if kind == "checkpoint":
        return CheckpointReport(*head, _num(record, "seconds", MAX_TIME_S))
    if kind == "start":
        return StartReport(*head, _num(record, "startup_s", MAX_TIME_S))
    # checked in this order, so a record with several fields out of range names the same one
    iterations = _int(record, "iterations", 100_000_000)
    samples, seconds = _num(record, "samples", 1e13), _num(record, "seconds", MAX_TIME_S)
    t_d, t_w = _times(record, "t_d"), _times(record, "t_w")
    return RunReport(*head, iterations, t_d, t_w, samples, seconds)


@dataclass(frozen=True)
class ProgressReport:
    """A job's single progress file (jobs without the probe), checked field by field.

    Placement fields the job claims (``nodes``, ``gpus``, ``gpu_type``) are
    believed only when they agree with where Slurm runs the job.
    """

    samples_done: float | None = None
    at: float | None = None
    per_gpu: float | None = None
    nodes: tuple[str, ...] = ()
    gpus: int | None = None
    gpu_type: str | None = None


_PROGRESS_KEYS = frozenset({"samples_done", "at", "per_gpu", "nodes", "gpus", "gpu_type"})
_PROGRESS_KEYS |= {"restarts"}
_PROGRESS_JSON = JsonLimits(max_bytes=MAX_PROGRESS_BYTES, max_depth=2, max_values=1024)
_NODE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def parse_progress(data: bytes) -> ProgressReport:
    """A progress file: bounded, finite, closed keys; :class:`UserDataError` says why not."""
    body = load_json(data, _PROGRESS_JSON, "progress file")
    if not isinstance(body, dict):
        raise UserDataError("progress file is not a JSON object")
    check_keys(body, _PROGRESS_KEYS, "progress file")

    def opt(key: str, parse: Callable[[object], Any]) -> Any:
        return None if body.get(key) is None else parse(body[key])

    nodes = body.get("nodes") or []
    if not isinstance(nodes, list) or len(nodes) > 256:
        raise UserDataError("progress file: nodes is not a list of at most 256 names")
    if "restarts" in body:
        integer(body["restarts"], 0, 1_000_000, "progress file: restarts")
    return ProgressReport(
        samples_done=opt("samples_done", lambda v: finite(v, 0, 1e15, "samples_done")),
        at=opt("at", lambda v: finite(v, 0, 1e11, "at")),
        per_gpu=opt("per_gpu", lambda v: finite(v, 0, 1e9, "per_gpu")),
        nodes=tuple(short_text(n, 64, "a node", _NODE_RE) for n in nodes),
        gpus=opt("gpus", lambda v: integer(v, 1, 4096, "gpus")),
        gpu_type=opt("gpu_type", lambda v: short_text(v, 64, "gpu_type", _NODE_RE)),
    )
