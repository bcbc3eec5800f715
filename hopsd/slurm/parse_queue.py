"""Jobs from a narrow ``squeue --Format`` read: the fields a tick needs, a tenth of the JSON.

At ten thousand queued jobs ``squeue --json`` prints about 40 MB and takes
squeue seconds to build (and Python seconds to decode); the same jobs with
only the fields below print about 3 MB in a fraction of a second. The
command is run as ``env SLURM_TIME_FORMAT=%s squeue ...`` so times come as
epoch seconds whatever the time zone of the host squeue runs on.

Each field ends with the ASCII unit separator, so a line splits into exactly
:data:`FIELDS` values. A job name, comment or path that holds a separator or
a newline makes the line fail that count: the whole read is then refused
(:class:`NarrowReadRefused`) and the caller reads the JSON instead, never a
guess. Two things the JSON has are not among squeue's formatted fields:

* per-node GPUs: they follow from the allocation when the job runs on one
  node or asked the same GPUs on every node (``--gres=gpu:M``);
* the reason code, where Slurm keeps a description (``job requeued in held
  state``): squeue prints the description instead. Only a held or completing
  job's reason decides anything (whose hold it is), so only there it counts.

A job short of either is named in :attr:`NarrowQueue.needs_detail`, for the
caller to take from a JSON read.

The job state is squeue's one word, as the 22.05 JSON gives it
(``COMPLETING`` for a requeued job still letting go of its nodes, where the
JSON of 23.02+ says ``PENDING`` with a ``COMPLETING`` flag); both read as
holding GPUs. Fields the tick's observation does not read are left empty:
the output paths, the flags and ``alloc_tres`` (squeue prints the request
where a job has no allocation record, so the field cannot say what
:func:`hopsd.daemon.requeue_check.hit_an_ended_run` asks; that check reads
the JSON). A running job without a time limit has no end time in squeue's
print; it is given the JSON's (its start plus a year).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hopsd.slurm import gres
from hopsd.slurm.errors import SlurmParseError
from hopsd.slurm.parse_limits import slurm_duration_s
from hopsd.slurm.parse_squeue import cpus_per_gpu, expand_nodes
from hopsd.slurm.port import GPU_HOLDING_STATES, SlurmJob, is_held
from hopsd.slurm.tag import try_decode

#: Ends every field; no Slurm value holds it, and a user's text that does is refused.
SEPARATOR = "\x1f"
#: squeue ``--Format`` fields, in the order :func:`parse_queue` reads them. Free text last.
FIELDS = (
    "JobID",
    "State",
    "Reason",
    "PriorityLong",
    "Partition",
    "NodeList",
    "tres-alloc",
    "tres-per-node",
    "tres-per-job",
    "tres-per-task",
    "tres-per-socket",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "TimeLimit",
    "RestartCnt",
    "UserName",
    "Account",
    "QOS",
    "cpus-per-tres",
    "ArrayJobID",
    "ArrayTaskID",
    "ReqNodes",
    "WorkDir",
    "Name",
    "Comment",
)
_INDEX = {name: i for i, name in enumerate(FIELDS)}
#: How squeue prints "no value" in a formatted field (the JSON has an empty string).
_NOTHING = frozenset({"(null)", "N/A", "NONE", "Unknown", "None assigned"})
_TIME_FIELDS = ("SubmitTime", "StartTime", "EndTime")
_YEAR_S = 365 * 86400.0
_CODE = re.compile(r"^[A-Za-z0-9_]*$")


class NarrowReadRefused(SlurmParseError):
    """The formatted reply cannot be split safely (a user's text held a separator)."""


@dataclass(frozen=True, slots=True)
class NarrowQueue:
    """The jobs read, and those whose per-node GPUs or reason code the fields do not give."""

    jobs: tuple[SlurmJob, ...]
    needs_detail: frozenset[int]


def queue_argv() -> list[str]:
    """The command: every job in every state (as ``--states=all`` in the JSON read)."""
    spec = ",".join(f"{name}:{SEPARATOR}" for name in FIELDS)
    return ["env", "SLURM_TIME_FORMAT=%s", "squeue", "--noheader", "--states=all", "-O", spec]


#: One parsed line: the job and whether it is whole (see :func:`job_from_values`).
Parsed = tuple[SlurmJob, bool]


def parse_queue(text: str, memo: dict[str, Parsed] | None = None) -> NarrowQueue:
    """Every job of the formatted reply; :class:`NarrowReadRefused` if any line is not whole.

    With ``memo`` (the previous read's lines and their jobs), a line unchanged
    since is not parsed again: between two ticks most of a large queue is the
    same text. ``memo`` is replaced by this read's lines.
    """
    jobs: list[SlurmJob] = []
    detail: set[int] = set()
    before = memo if memo is not None else {}
    now: dict[str, Parsed] = {}
    for line in text.split("\n"):
        if not line:
            continue
        parsed = before.get(line)
        if parsed is None:
            values = line.split(SEPARATOR)
            if len(values) != len(FIELDS) + 1 or values[-1].strip():
                raise NarrowReadRefused(
                    f"squeue --Format: {len(values) - 1} fields in a line, expected {len(FIELDS)}"
                )
            parsed = job_from_values(values)
        now[line] = parsed
        job, whole = parsed
        jobs.append(job)
        if not whole:
            detail.add(job.job_id)
    if memo is not None:
        memo.clear()
        memo.update(now)
    return NarrowQueue(tuple(jobs), frozenset(detail))


def job_from_values(values: Sequence[str]) -> tuple[SlurmJob, bool]:
    """One job, and whether it is whole (False: its per-node GPUs or reason are the JSON's)."""

    def get(name: str) -> str:
        value = values[_INDEX[name]].strip()
        return "" if value in _NOTHING else value

    job_id = _number(get("JobID"), "JobID")
    state = values[_INDEX["State"]].strip() or "UNKNOWN"
    reason = values[_INDEX["Reason"]].strip()
    priority = _number(get("PriorityLong"), "PriorityLong") if get("PriorityLong") else None
    nodes = expand_nodes(get("NodeList"))
    alloc = get("tres-alloc")
    request = next((get(k) for k in FIELDS[7:11] if get(k)), "")
    holding, pending = state in GPU_HOLDING_STATES, state == "PENDING"
    by_node, whole = _gpus_by_node(nodes, alloc, get("tres-per-node")) if holding else ((), True)
    if ((pending and priority == 0) or state == "COMPLETING") and not _CODE.match(reason):
        whole = False  # a description stands for the reason code that tells whose hold it is
    times = {k: _epoch(get(k)) for k in _TIME_FIELDS}
    limit_s = _limit_s(get("TimeLimit"))
    comment = values[_INDEX["Comment"]].strip()
    comment = "" if comment == "(null)" else comment
    tag, tag_error = try_decode(comment)
    name = values[_INDEX["Name"]].strip()
    user = get("UserName")
    array_job, task = get("ArrayJobID"), get("ArrayTaskID")
    is_task = task.isdigit() and array_job.isdigit()
    job = SlurmJob(
        job_id=job_id,
        name=name,
        user=user,
        account=get("Account"),
        state=state,
        reason=reason,
        held=is_held(state, reason, priority),
        partition=get("Partition"),
        nodes=nodes,
        gpus_by_node=by_node,
        gpu_type=gres.gpu_type(_typed_gpus(alloc)) if holding else None,
        gres_request=request,
        submit_time=times["SubmitTime"],
        start_time=None if pending else times["StartTime"],
        end_time=None if pending else _end(times, limit_s),
        comment=comment,
        tag=tag,
        tag_error=tag_error,
        restarts=_number(get("RestartCnt") or "0", "RestartCnt"),
        work_dir=get("WorkDir"),
        stdout_path="",
        priority=priority,
        requested_nodes=expand_nodes(get("ReqNodes")),
        array_id=f"{array_job}_{task}" if is_task else "",
        array_tasks="" if is_task else task,
        time_limit_s=limit_s,
        cpus_per_gpu=cpus_per_gpu(get("cpus-per-tres")),
        qos=get("QOS"),
    )
    return job, whole


def _gpus_by_node(
    nodes: tuple[str, ...], alloc: str, per_node: str
) -> tuple[tuple[tuple[str, int], ...], bool]:
    """Per-node GPUs where the allocation alone tells them; ``((), False)`` where it does not.

    One node holds the whole allocation; several nodes hold ``M`` each when the
    job asked ``gpu:M`` per node and was given ``M`` times as many in all.
    """
    total = gres.tres_gpus(alloc)
    if total <= 0 or not nodes:
        return (), True
    if len(nodes) == 1:
        return ((nodes[0], total),), True
    each = gres.gpu_count(per_node)
    if each > 0 and each * len(nodes) == total:
        return tuple(sorted((n, each) for n in nodes)), True
    return (), False


def _typed_gpus(alloc: str) -> str:
    """``gres/gpu:a100=2`` entries of a TRES list as a GRES list (``gpu:a100:2``)."""
    out = []
    for key, value in gres.tres_dict(alloc).items():
        if key.startswith("gres/gpu:") and value.isdigit():
            out.append(f"gpu:{key.removeprefix('gres/gpu:')}:{value}")
    return ",".join(out)


def _number(text: str, field: str) -> int:
    if not text.isdigit():
        raise NarrowReadRefused(f"squeue --Format: {field} is {text!r}, not a number")
    return int(text)


def _epoch(text: str) -> float | None:
    """Epoch seconds (``SLURM_TIME_FORMAT=%s``); None for unset times."""
    if not text.isdigit():
        return None
    value = float(text)
    return value if value > 0 else None


def _end(times: dict[str, float | None], limit_s: float | None) -> float | None:
    """The end time; for a started job without one (squeue prints ``NONE`` under no
    limit), Slurm's own: its start plus its limit, or plus a year (what the JSON gives)."""
    end, start = times["EndTime"], times["StartTime"]
    if end is not None or start is None:
        return end
    return start + (limit_s if limit_s is not None else _YEAR_S)


def _limit_s(text: str) -> float | None:
    try:
        return slurm_duration_s(text)
    except SlurmParseError:
        return None
