"""Gavel's published trace format in: its ``.trace`` lines plus its throughputs JSON.

A Gavel trace has one job per line, tab-separated::

    job_type  command  working_directory  num_steps_arg  needs_data_dir  total_steps
    scale_factor  [mode]  priority_weight  SLO  arrival_time

(``mode`` appears in later versions of the format: 10 or 11 fields). Its
throughputs JSON maps worker type -> ``"('<job_type>', <scale_factor>)"`` ->
``{"null": steps/s, ...}``, the isolated throughput of the job run on
``scale_factor`` GPUs of the type (other keys are co-location throughputs).

Conversion, and what hops's simulator cannot express:

* Each job becomes a rigid job of ``scale_factor`` GPUs arriving at
  ``arrival_time`` seconds. Its size is ``total_steps`` times the batch size
  named in its job type (``"ResNet-50 (batch size 64)"``; 1 when none is named,
  so a step counts as one sample).
* Each job type becomes a model whose single-GPU throughput on each type is
  Gavel's ``scale_factor = 1`` figure times its batch, and whose
  ``measured_throughput`` is Gavel's figure at every other scale factor it
  measured on that type, times the batch: the simulator's truth runs a job of
  a measured scale factor exactly as fast as Gavel's table says, whatever the
  placement (Gavel's simulator does not model placement either). For counts
  Gavel did not measure the truth uses its per-iteration physics (compute,
  then an all-reduce of the model's parameters), whose parameter count is
  fitted, per type, to Gavel's largest measured scale factor that fits on one
  server of the cluster, the median over types kept (types where Gavel scales
  super-linearly fit zero communication). The scheduler is told only the
  single-GPU figures and the parameter count; it learns the measured scaling
  by running the jobs, as hopsd would.
* A scale factor Gavel gives 0 steps/s on a type (the job does not fit it)
  caps the job type's GPUs on that type below it (``max_gpus``; 0 when even
  one GPU does not fit): no policy places it there.
* Not expressed: ``priority_weight`` and ``SLO`` (hops's policies have no job
  weights or deadlines), co-location (packing) throughputs, data loading
  (Gavel's throughputs already include it; it is folded into compute), and
  ``command``, ``working_directory``, ``num_steps_arg``, ``needs_data_dir``
  (they run the real job). The ``<type>_unconsolidated`` worker types (a job
  spread over servers) are not read: Gavel's simulator does not use them
  either, it runs a scale factor at its consolidated figure wherever it lands.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hopsd.core.model import Cluster
from hopsd.sim.trace import TraceError
from hopsd.sim.truth import BACKWARD_SHARE, COMM_OVERLAP, FORWARD_SHARE, UPDATE_SHARE, ModelSpec
from hopsd.sim.workload import JobSpec

_KEY = re.compile(r"^\('(?P<job>.+)', (?P<scale>\d+)\)$")
_BATCH = re.compile(r"\(batch size (\d+)\)")


def batch_of(job_type: str) -> int:
    """The batch size a Gavel job type names, 1 when it names none."""
    found = _BATCH.search(job_type)
    return int(found.group(1)) if found else 1


def read_gavel_trace(path: str | Path) -> list[JobSpec]:
    """Jobs of a Gavel ``.trace`` file, sorted by arrival (model = Gavel job type)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror}") from exc
    jobs: list[JobSpec] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{p} line {number}"
        fields = line.split("\t")
        if len(fields) not in (10, 11):
            raise TraceError(f"{where}: a Gavel trace line has 10 or 11 tab-separated fields")
        job_type = fields[0]
        try:
            total_steps = int(fields[5])
            scale = int(fields[6])
            arrival = float(fields[-1])
        except ValueError:
            raise TraceError(
                f"{where}: total_steps, scale_factor and arrival_time must be numbers"
            ) from None
        if total_steps <= 0 or scale <= 0 or arrival < 0:
            raise TraceError(f"{where}: steps and scale factor > 0, arrival >= 0")
        jobs.append(
            JobSpec(
                job_id=f"g{number:05d}",
                submit_time=arrival,
                demands=(scale,),
                total_samples=float(total_steps * batch_of(job_type)),
                model=job_type,
            )
        )
    if not jobs:
        raise TraceError(f"{p}: the trace holds no jobs")
    return sorted(jobs, key=lambda j: j.submit_time)


def read_gavel_throughputs(path: str | Path) -> dict[str, dict[tuple[str, int], float]]:
    """worker type -> (job type, scale factor) -> isolated steps/s (0: Gavel cannot run it)."""
    p = Path(path)
    try:
        raw: Any = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p}: not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise TraceError(f"{p}: expected an object of worker types")
    out: dict[str, dict[tuple[str, int], float]] = {}
    for worker, table in raw.items():
        if not isinstance(table, dict):
            raise TraceError(f"{p}: {worker!r} must map job types to throughputs")
        per: dict[tuple[str, int], float] = {}
        for key, value in table.items():
            found = _KEY.match(key)
            if found is None:
                raise TraceError(f"{p}: {worker!r}: key {key!r} is not \"('<job type>', <n>)\"")
            alone = value.get("null") if isinstance(value, dict) else None
            if isinstance(alone, int | float) and not isinstance(alone, bool) and alone >= 0:
                per[(found.group("job"), int(found.group("scale")))] = float(alone)
        out[worker] = per
    return out


def fitted_comm_s(compute_s: float, efficiency: float) -> float:
    """All-reduce seconds per iteration giving ``efficiency`` of linear scaling on one server.

    Inverts the truth model's iteration time with no data stall: forward and
    update, then the larger of backward plus the non-overlapped share of the
    all-reduce and the all-reduce itself.
    """
    target = compute_s / efficiency - (FORWARD_SHARE + UPDATE_SHARE) * compute_s
    backward = BACKWARD_SHARE * compute_s
    if target <= backward:
        return 0.0
    overlapped = (target - backward) / COMM_OVERLAP
    return overlapped if overlapped <= target else target


def gavel_models(
    throughputs: Mapping[str, Mapping[tuple[str, int], float]],
    job_types: set[str],
    cluster: Cluster,
) -> dict[str, ModelSpec]:
    """One model per Gavel job type the trace uses, on the cluster's GPU types."""
    missing = [t for t in cluster.gpu_types if t not in throughputs]
    if missing:
        raise TraceError(
            f"Gavel throughputs have no worker type {missing}; they have {sorted(throughputs)}"
        )
    return {job_type: _model(throughputs, job_type, cluster) for job_type in sorted(job_types)}


def _model(
    throughputs: Mapping[str, Mapping[tuple[str, int], float]], job_type: str, cluster: Cluster
) -> ModelSpec:
    """The model of one job type: Gavel's figures on each type, its all-reduce fitted."""
    batch = batch_of(job_type)
    single: dict[str, float] = {}
    measured: dict[str, dict[str, float]] = {}
    caps: dict[str, int] = {}
    params: list[float] = []
    for gpu_type, spec in cluster.gpu_types.items():
        steps = {s: v for (j, s), v in throughputs[gpu_type].items() if j == job_type}
        # Gavel writes 0 for a scale factor the type cannot run (the job does not fit)
        unfit = [s for s, v in steps.items() if v <= 0]
        if unfit:
            caps[gpu_type] = min(unfit) - 1
            steps = {s: v for s, v in steps.items() if s < min(unfit)}
            if not steps:
                continue
        one = steps.get(1)
        if one is None:
            raise TraceError(f"Gavel throughputs lack ('{job_type}', 1) on {gpu_type!r}")
        single[gpu_type] = one * batch
        measured[gpu_type] = {str(s): v * batch for s, v in steps.items() if s > 1}
        server = max((n.gpus for n in cluster.nodes_of_type(gpu_type)), default=1)
        scales = [s for s in steps if 1 < s <= server]
        if scales:
            scale = max(scales)
            comm = fitted_comm_s(1.0 / one, steps[scale] / (scale * one))
            params.append(comm * spec.b_link * scale / (scale - 1))
    if not single:
        raise TraceError(f"Gavel throughputs say no GPU type of the cluster runs {job_type!r}")
    return ModelSpec(
        name=job_type,
        params=statistics.median(params) if params else 0.0,
        batch_size=batch,
        throughput=single,
        comm_scale=1.0,
        dataset="gavel",
        max_gpus=caps,
        measured_throughput={t: m for t, m in measured.items() if m},
    )
