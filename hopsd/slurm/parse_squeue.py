"""Jobs from ``squeue --json``: one call carries every field hops reads.

Verified on 22.05.8: ``squeue --json`` is produced with ``SHOW_DETAIL``, so
``gres_detail`` holds one ``gpu:TYPE:N(IDX:..)`` string per allocated node, in
the order of ``job_resources.allocated_nodes``. Newer releases (23.02+) keep
``gres_detail`` but wrap numbers, list states and nest ``job_resources``;
both shapes are read here (recorded on 24.11.5 too). From 23.02 on a requeued
job is first PENDING with a COMPLETING flag while its last run lets go of the
nodes: it still holds their GPUs then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hostlist

from hopsd.slurm import gres, jsonshape
from hopsd.slurm.port import GPU_HOLDING_STATES, SlurmJob, is_held
from hopsd.slurm.tag import try_decode

MAX_OUTPUT_PATTERN = 4096


def parse_jobs(text: str) -> list[SlurmJob]:
    """All jobs of a ``squeue --json`` reply; records without a job id are skipped."""
    return jobs_from_document(jsonshape.load_document(text, "squeue --json"))


def jobs_from_document(doc: Mapping[str, Any]) -> list[SlurmJob]:
    """The jobs of a decoded reply: ``squeue --json`` and slurmrestd's ``GET .../jobs`` alike."""
    jobs = (job_from_record(r) for r in jsonshape.mappings(doc.get("jobs")))
    return [j for j in jobs if j is not None]


def job_from_record(rec: Mapping[str, Any]) -> SlurmJob | None:
    """One job record of either JSON shape."""
    job_id = jsonshape.number(rec.get("job_id"))
    if job_id is None or job_id <= 0:
        return None
    words = jsonshape.states(rec.get("job_state"))
    state = words[0] if words else "UNKNOWN"
    flags = tuple(words[1:]) + jsonshape.string_list(rec.get("flags"))
    reason = jsonshape.text(rec.get("state_reason"))
    priority = jsonshape.number(rec.get("priority"))
    comment = _comment(rec.get("comment"))
    tag, tag_error = try_decode(comment)
    nodes = expand_nodes(jsonshape.text(rec.get("nodes")))
    holds = state in GPU_HOLDING_STATES or "COMPLETING" in flags
    # A pending job's times are the scheduler's estimates (24.11 gives a requeued,
    # held job a start in the future and an end decades away), never facts.
    pending = state == "PENDING"
    by_node = _gpus_by_node(rec, nodes) if holds else ()
    return SlurmJob(
        job_id=int(job_id),
        name=jsonshape.text(rec.get("name")),
        user=jsonshape.text(rec.get("user_name")),
        account=jsonshape.text(rec.get("account")),
        state=state,
        reason=reason,
        held=is_held(state, reason, priority, rec.get("hold") is True),
        partition=jsonshape.text(rec.get("partition")),
        nodes=nodes,
        gpus_by_node=by_node,
        gpu_type=gres.gpu_type(",".join(jsonshape.string_list(rec.get("gres_detail")))),
        gres_request=_gres_request(rec),
        submit_time=jsonshape.timestamp(rec.get("submit_time")),
        start_time=None if pending else jsonshape.timestamp(rec.get("start_time")),
        end_time=None if pending else jsonshape.timestamp(rec.get("end_time")),
        comment=comment,
        tag=tag,
        tag_error=tag_error,
        restarts=jsonshape.integer(rec.get("restart_cnt")),
        work_dir=jsonshape.text(rec.get("current_working_directory")),
        stdout_path=expand_output_pattern(jsonshape.text(rec.get("standard_output")), rec),
        priority=None if priority is None else int(priority),
        flags=flags,
        requested_nodes=expand_nodes(jsonshape.text(rec.get("required_nodes"))),
        alloc_tres=jsonshape.text(rec.get("tres_alloc_str")),
        stderr_path=expand_output_pattern(jsonshape.text(rec.get("standard_error")), rec),
        array_id=_array_id(rec),
        array_tasks=jsonshape.text(rec.get("array_task_string")),
        time_limit_s=_time_limit_s(rec.get("time_limit")),
        cpus_per_gpu=cpus_per_gpu(jsonshape.text(rec.get("cpus_per_tres"))),
        qos=jsonshape.text(rec.get("qos")),
    )


def cpus_per_gpu(text: str) -> int:
    """``--cpus-per-gpu`` from ``cpus_per_tres`` (``gres:gpu:2``, ``gres/gpu:2``); 0 if none."""
    for part in text.split(","):
        fields = part.replace("/", ":").split(":")
        if "gpu" in fields[:2] and fields[-1].isdigit():
            return int(fields[-1])
    return 0


def _time_limit_s(value: Any) -> float | None:
    """``time_limit`` (minutes) in seconds; None when unset or infinite.

    Recorded: 22.05 prints plain minutes (a running job without a limit shows
    525600, the year Slurm gives it; a pending one shows none), 24.11 wraps them
    (``{"set": false, "infinite": true}`` when unlimited).
    """
    minutes = jsonshape.number(value)
    if minutes is None or minutes <= 0 or int(minutes) in jsonshape.UNSET_NUMBERS:
        return None
    return minutes * 60.0


def _array_id(rec: Mapping[str, Any]) -> str:
    """``ARRAY_TASK`` for one task of a job array, as squeue and scancel write it."""
    array_id = jsonshape.integer(rec.get("array_job_id"))
    task = jsonshape.number(rec.get("array_task_id"))
    if not array_id or task is None or task >= NO_ARRAY_TASK:
        return ""
    return f"{array_id}_{int(task)}"


# Slurm's NO_VAL for "not an array task".
NO_ARRAY_TASK = 4294967294


def expand_output_pattern(pattern: str, rec: Mapping[str, Any]) -> str:
    """Fill the common ``%`` fields of an output path (``%j``, ``%u``, ``%x``, ``%A``...).

    squeue prints the pattern as submitted; scontrol prints it expanded.
    Unknown fields are left as they are.
    """
    if "%" not in pattern or len(pattern) > MAX_OUTPUT_PATTERN:
        return pattern  # a user's pattern beyond any real path is left as it is
    job_id = jsonshape.integer(rec.get("job_id"))
    array_id = jsonshape.integer(rec.get("array_job_id"))
    task = jsonshape.number(rec.get("array_task_id"))
    values = {
        "j": str(job_id),
        "u": jsonshape.text(rec.get("user_name")),
        "x": jsonshape.text(rec.get("name")),
        "A": str(array_id or job_id),
        "a": "4294967294" if task is None else str(int(task)),
        "%": "%",
    }
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%" and i + 1 < len(pattern) and pattern[i + 1] in values:
            out.append(values[pattern[i + 1]])
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _comment(value: Any) -> str:
    if isinstance(value, Mapping):  # some releases split job/admin/system comments
        return jsonshape.text(value.get("job"))
    return jsonshape.text(value)


def _gres_request(rec: Mapping[str, Any]) -> str:
    for key in ("tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket"):
        value = jsonshape.text(rec.get(key))
        if value:
            return value
    return ""


def expand_nodes(nodelist: str) -> tuple[str, ...]:
    """A Slurm hostlist (``a100n[1-2]``) as node names; none for Slurm's empty words."""
    if not nodelist or nodelist in ("(null)", "None assigned"):
        return ()
    return tuple(hostlist.expand_hostlist(nodelist))


def _allocation_order(rec: Mapping[str, Any], nodes: tuple[str, ...]) -> tuple[str, ...]:
    """Node names in the order Slurm prints ``gres_detail`` (allocation order)."""
    res = rec.get("job_resources")
    if isinstance(res, Mapping):
        alloc = res.get("allocated_nodes")  # 22.05, 23.02
        if not isinstance(alloc, list) and isinstance(res.get("nodes"), Mapping):
            alloc = res["nodes"].get("allocation")  # 23.11+
        if isinstance(alloc, list):
            names = [
                jsonshape.text(a.get("nodename") or a.get("name"))
                for a in alloc
                if isinstance(a, Mapping)
            ]
            if names and all(names):
                return tuple(names)
    return nodes


def _gpus_by_node(rec: Mapping[str, Any], nodes: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    order = _allocation_order(rec, nodes)
    detail = jsonshape.string_list(rec.get("gres_detail"))
    if detail and len(detail) == len(order):
        pairs = ((n, gres.gpu_count(d)) for n, d in zip(order, detail, strict=True))
        return tuple(sorted((n, g) for n, g in pairs if g > 0))
    total = gres.tres_gpus(jsonshape.text(rec.get("tres_alloc_str")))
    if len(order) == 1 and total > 0:
        return ((order[0], total),)
    return ()
