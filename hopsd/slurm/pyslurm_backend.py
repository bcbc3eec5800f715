"""The Slurm port over pyslurm (optional extra ``hops-scheduler[pyslurm]``, pyslurm 25.11 API).

Reads and state changes go through the Slurm C API (``pyslurm.Jobs.load``,
``pyslurm.Nodes.load``, ``pyslurm.db.Jobs.load``, ``Job.release/hold/requeue/
cancel``). Two operations stay with the CLI backend on purpose: ``submit``
(sbatch must run as the user and read the script's ``#SBATCH`` lines) and
``update_pending``/``make_eligible`` (pyslurm's ``Job.modify`` does not change
node counts on an update). pyslurm builds only against the Slurm release it
matches, so importing this module may raise ``ImportError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import hostlist
import pyslurm

from hopsd.slurm import gres
from hopsd.slurm.cli_backend import CliFallback
from hopsd.slurm.errors import SlurmCommandError, SlurmJobNotFoundError, SlurmUnavailableError
from hopsd.slurm.port import (
    AccountingRecord,
    SlurmJob,
    SlurmNode,
    hold_each,
    is_held,
)
from hopsd.slurm.tag import try_decode


class PyslurmSlurm(CliFallback):
    """:class:`~hopsd.slurm.port.SlurmPort` through pyslurm, with the CLI for writes it lacks."""

    name = "pyslurm"

    def release(self, job_id: int) -> None:
        _rpc(lambda: pyslurm.Job(job_id).release())

    def hold(self, job_id: int) -> None:
        _rpc(lambda: pyslurm.Job(job_id).hold())

    def hold_many(self, job_ids: Sequence[int]) -> dict[int, str]:
        """One request per job: Slurm's API holds a single job per call."""
        return hold_each(self.hold, job_ids)

    def requeue_hold(self, job_id: int) -> None:
        """Requeue held, then an operator's hold the owner cannot release (as the CLI port)."""
        _rpc(lambda: pyslurm.Job(job_id).requeue(hold=True))
        _rpc(lambda: pyslurm.Job(job_id).hold())

    def cancel(self, job_id: int | str, as_user: str | None = None) -> None:
        if as_user is not None or isinstance(job_id, str):
            self._cli.cancel(job_id, as_user=as_user)
            return
        _rpc(lambda: pyslurm.Job(int(job_id)).cancel())

    def list_jobs(self) -> list[SlurmJob]:
        jobs = _rpc(lambda: pyslurm.Jobs.load(preload_passwd_info=True))
        return [job_from_pyslurm(j) for j in _values(jobs)]

    def list_nodes(self) -> list[SlurmNode]:
        nodes = _rpc(lambda: pyslurm.Nodes.load())
        return sorted((node_from_pyslurm(n) for n in _values(nodes)), key=lambda n: n.name)

    def accounting(self, job_ids: Sequence[int]) -> list[AccountingRecord]:
        if not job_ids:
            return []
        flt = pyslurm.db.JobFilter(ids=[int(i) for i in job_ids])
        jobs = _rpc(lambda: pyslurm.db.Jobs.load(flt))
        by_id = {r.job_id: r for r in (record_from_pyslurm(j) for j in _values(jobs))}
        return [by_id[i] for i in sorted(by_id)]


def job_from_pyslurm(job: Any) -> SlurmJob:
    """Map a ``pyslurm.Job`` onto :class:`SlurmJob` (attribute names of pyslurm 25.11)."""
    state = str(job.state or "UNKNOWN").upper()
    reason = str(job.state_reason or "")
    comment = str(job.comment or "")
    tag, tag_error = try_decode(comment)
    layout: Mapping[str, Any] = {}
    if state == "RUNNING":
        layout = job.get_resource_layout_per_node() or {}
    by_node = tuple(sorted((n, _gres_dict_gpus(v.get("gres"))) for n, v in layout.items()))
    priority = job.priority
    return SlurmJob(
        job_id=int(job.id),
        name=str(job.name or ""),
        user=str(job.user_name or ""),
        account=str(job.account or ""),
        state=state,
        reason=reason,
        held=is_held(state, reason, priority),
        partition=str(job.partition or ""),
        nodes=_expand(job.allocated_nodes),
        gpus_by_node=tuple(p for p in by_node if p[1] > 0),
        gpu_type=_layout_type(layout),
        gres_request=_request(job.gres_per_node),
        submit_time=_time(job.submit_time),
        start_time=_time(job.start_time),
        end_time=_time(job.end_time),
        comment=comment,
        tag=tag,
        tag_error=tag_error,
        restarts=int(job.requeue_count or 0),
        work_dir=str(job.working_directory or ""),
        stdout_path=str(job.standard_output or ""),
        priority=None if priority is None else int(priority),
        requested_nodes=_expand(job.required_nodes),
        time_limit_s=_minutes_s(job.time_limit),
        qos=str(getattr(job, "qos", "") or ""),
    )


def _minutes_s(minutes: Any) -> float | None:
    """pyslurm's time limit (minutes; None or 0 when unlimited) in seconds."""
    return float(minutes) * 60.0 if isinstance(minutes, int | float) and minutes > 0 else None


def node_from_pyslurm(node: Any) -> SlurmNode:
    words = str(node.state or "UNKNOWN").upper().replace("+", " ").split()
    return SlurmNode(
        name=str(node.name),
        partitions=tuple(sorted(node.partitions or ())),
        gpu_type=_gres_dict_type(node.configured_gres),
        gpus_total=_gres_dict_gpus(node.configured_gres),
        gpus_alloc=_gres_dict_gpus(node.allocated_gres),
        state=words[0] if words else "UNKNOWN",
        flags=tuple(words[1:]),
    )


def record_from_pyslurm(job: Any) -> AccountingRecord:
    tres = job.allocated_tres if isinstance(job.allocated_tres, str) else ""
    return AccountingRecord(
        job_id=int(job.id),
        state=str(job.state or "UNKNOWN").split()[0].upper(),
        exit_code=int(job.exit_code or 0),
        signal=int(job.exit_code_signal or 0),
        start_time=_time(job.start_time),
        end_time=_time(job.end_time),
        elapsed_s=int(job.elapsed_time or 0),
        nodes=_expand(job.nodelist),
        alloc_tres=gres.tres_dict(tres),
        partition=str(job.partition or ""),
        user=str(job.user_name or ""),
    )


def _rpc(call: Any) -> Any:
    """Run a pyslurm call, turning ``RPCError`` into the port's typed errors."""
    try:
        return call()
    except pyslurm.RPCError as exc:
        text = str(exc)
        if "Invalid job id" in text:
            raise SlurmJobNotFoundError(("pyslurm",), 1, text) from exc
        if "Unable to contact" in text or "timed out" in text:
            raise SlurmUnavailableError(f"pyslurm: {text}") from exc
        raise SlurmCommandError(("pyslurm",), 1, text) from exc


def _values(collection: Any) -> Iterable[Any]:
    return list(collection.values()) if hasattr(collection, "values") else list(collection)


def _gres_dict_gpus(value: Any) -> int:
    """GPUs in pyslurm's GRES dict (``{"gpu:a100": 4}`` or ``{"gpu:a100": {"count": 2}}``)."""
    total = 0
    for key, item in (value or {}).items():
        if not str(key).startswith("gpu"):
            continue
        count = item.get("count", 0) if isinstance(item, Mapping) else item
        total += int(count)
    return total


def _gres_dict_type(value: Any) -> str | None:
    types = {str(k).split(":")[1] for k in (value or {}) if str(k).startswith("gpu:")}
    return types.pop() if len(types) == 1 else None


def _layout_type(layout: Mapping[str, Any]) -> str | None:
    for value in layout.values():
        if isinstance(value, Mapping):
            return _gres_dict_type(value.get("gres"))
    return None


def _request(value: Any) -> str:
    gpus = _gres_dict_gpus(value)
    return f"gres:gpu:{gpus}" if gpus else ""


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _expand(nodes: Any) -> tuple[str, ...]:
    if not nodes or not isinstance(nodes, str):
        return ()
    return tuple(hostlist.expand_hostlist(nodes))
