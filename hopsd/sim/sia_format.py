"""Sia's published workload format in: its workload CSV plus its per-model placement profiles.

A Sia workload CSV has one job per row::

    name,time,application,num_replicas,batch_size[,category]

(``time``: arrival, seconds; ``batch_size``: the job's total batch;
``category``, when present: ``rigid``, ``scale-gpus`` or ``adaptive``). The
profiles are Sia's traces directory, one folder per application::

    <profiles>/<application>/placements-<gpu type>.csv   placement,local_bsz,step_time,sync_time
    <profiles>/<application>/scalability-<gpu type>.csv  num_nodes,num_replicas,local_bsz,step_time
    <profiles>/<application>/validation-<batch>.csv      progress,iteration,metric,grad_sqr,grad_var

(columns in any order). ``placement`` lists GPUs per node (``"2"``: two GPUs
on one node, ``"11"``: one on each of two nodes); the GPU type is the file's
suffix, so the cluster file names its GPU types as Sia names its clusters
(``rtx``, ``dgx-ext``, ``aws``...). A ``validation`` curve gives, per epoch,
the iterations a run at that total batch has taken.

Conversion, and what hops's simulator cannot express:

* **Size.** A job runs the application's whole validation curve at its batch
  size: ``total_samples`` = iterations after the last epoch times the batch,
  the iterations interpolated linearly between the two validated batch sizes
  around it (as Sia's simulator does). Sia tunes each job's batch size for
  goodput (statistical efficiency); hops's jobs keep the trace's batch, so an
  adaptive job is replayed as if Sia had kept its batch.
* **Models.** Each distinct (application, batch, replicas) of the trace is a
  model whose per-GPU batch is ``ceil(batch / num_replicas)`` (hops fixes the
  per-GPU batch; Sia keeps the total batch and divides it over the GPUs it
  gives). Its single-GPU throughput on each type is that local batch over the
  ``placement = 1`` step time, interpolated over ``local_bsz`` (the nearest
  profiled batch's per-sample rate outside the profiled range; Sia would
  accumulate gradients there). Sia's step times include data loading: it is
  folded into compute.
* **Scaling.** What Sia measured on several GPUs is the truth's
  ``measured_throughput``, at the model's local batch (interpolated as
  above): each placement of 2 or more GPUs (``"22"`` is ``"2+2"``; the orders
  of one shape, ``"13"`` and ``"31"``, averaged), each number of GPUs on a
  number of servers (the placements of as many averaged, as Sia averages them
  where it interpolates), then the ``scalability`` file's rows (``num_nodes``,
  ``num_replicas``) for GPUs and servers no placement covers. Where Sia
  interpolates between measured GPU and server counts hops falls back to its
  all-reduce model, whose volume is fitted, per type, to the largest one-node
  placement profiled at that local batch, the median over types kept. The
  scheduler is told the single-GPU figures and that volume; it learns the rest
  by measuring.
* **Per-type demand sets.** A type without a placements file for the
  application cannot run it (``max_gpus`` 0); on the others a job can use at
  most ``batch // min local_bsz`` GPUs (every GPU needs the smallest profiled
  local batch), as Sia's configurations are bounded.
* **Demands.** ``rigid`` jobs ask exactly ``num_replicas``. Others get Sia's
  GPU counts -- 1, 2, 4, then multiples of the smallest node size of the
  cluster, up to 64 -- that some type can hold for them, plus
  ``num_replicas``.
* **Restarts** cost each application's checkpoint-restore time as Sia's
  simulator charges it (cifar10 50 s, deepspeech2 25 s, bert 120 s, yolov3
  80 s, imagenet 250 s, ncf 15 s, others 30 s).
* Not expressed: Sia's calibration slowdowns, goodput/gradient statistics
  (``grad_sqr``, ``grad_var``, ``metric``), hybrid-parallel (pipeline) jobs,
  whose step times are per stage.
"""

from __future__ import annotations

import bisect
import csv
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hopsd.core.model import Cluster
from hopsd.sim.gavel_format import fitted_comm_s
from hopsd.sim.trace import TraceError
from hopsd.sim.truth import ModelSpec, measured_key
from hopsd.sim.workload import JobSpec

#: Checkpoint-restore seconds per application, as Sia's simulator charges a restart.
RESTORE_S = {
    "cifar10": 50.0,
    "deepspeech2": 25.0,
    "bert": 120.0,
    "yolov3": 80.0,
    "imagenet": 250.0,
    "ncf": 15.0,
}
DEFAULT_RESTORE_S = 30.0
#: Sia never offers a job more GPUs than this.
MAX_GPUS = 64
CATEGORIES = ("rigid", "scale-gpus", "adaptive")
_WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
_VALIDATION = re.compile(r"^validation-(\d+)\.csv$")


@dataclass(frozen=True, slots=True)
class SiaJob:
    """One row of a Sia workload CSV."""

    name: str
    time: float
    application: str
    num_replicas: int
    batch_size: int
    category: str


@dataclass(frozen=True)
class Placements:
    """One application's placements file on one GPU type: step and sync seconds by shape."""

    rows: Mapping[str, Sequence[tuple[int, float]]]  # placement -> (local_bsz, step_time), sorted

    @property
    def min_local_bsz(self) -> int:
        return min(b for rows in self.rows.values() for b, _ in rows)

    def step_time(self, placement: str, local_bsz: float) -> float | None:
        """Seconds per step at ``local_bsz``, interpolated; None when the shape is not profiled.

        Outside the profiled batches the nearest batch's per-sample time is scaled.
        """
        rows = self.rows.get(placement)
        if not rows:
            return None
        sizes = [b for b, _ in rows]
        at = bisect.bisect_left(sizes, local_bsz)
        if at < len(sizes) and sizes[at] == local_bsz:
            return rows[at][1]
        if at == 0 or at == len(sizes):
            b, t = rows[0] if at == 0 else rows[-1]
            return t * local_bsz / b
        (b0, t0), (b1, t1) = rows[at - 1], rows[at]
        return t0 + (t1 - t0) * (local_bsz - b0) / (b1 - b0)


def _open_csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from exc


def _number(where: str, row: Mapping[str, str], key: str) -> float:
    value = row.get(key)
    try:
        number = float(value) if value is not None else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise TraceError(f"{where}: {key} must be a number, got {value!r}")
    return number


def read_sia_workload(path: str | Path) -> list[SiaJob]:
    """Rows of a Sia workload CSV, sorted by arrival."""
    p = Path(path)
    rows = _open_csv(p)
    if not rows:
        raise TraceError(f"{p}: the workload holds no jobs")
    missing = [c for c in _WORKLOAD_COLUMNS if c not in rows[0]]
    if missing:
        raise TraceError(f"{p}: a Sia workload needs the columns {', '.join(missing)}")
    jobs: list[SiaJob] = []
    for number, row in enumerate(rows, start=2):
        where = f"{p} line {number}"
        replicas = _number(where, row, "num_replicas")
        batch = _number(where, row, "batch_size")
        arrival = _number(where, row, "time")
        category = (row.get("category") or "adaptive").strip() or "adaptive"
        if replicas < 1 or batch < 1 or arrival < 0 or replicas != int(replicas):
            raise TraceError(f"{where}: num_replicas and batch_size >= 1, time >= 0")
        if category not in CATEGORIES:
            raise TraceError(f"{where}: category must be one of {', '.join(CATEGORIES)}")
        if not row["name"] or not row["application"]:
            raise TraceError(f"{where}: name and application must not be empty")
        jobs.append(
            SiaJob(row["name"], arrival, row["application"], int(replicas), int(batch), category)
        )
    return sorted(jobs, key=lambda j: (j.time, j.name))


def read_placements(path: Path) -> Placements:
    """One ``placements-<type>.csv``."""
    by_shape: dict[str, list[tuple[int, float]]] = {}
    for number, row in enumerate(_open_csv(path), start=2):
        where = f"{path} line {number}"
        shape = (row.get("placement") or "").strip()
        if not shape.isdigit() or "0" in shape:
            raise TraceError(f"{where}: placement must list GPUs per node, got {shape!r}")
        local = _number(where, row, "local_bsz")
        step = _number(where, row, "step_time")
        if local < 1 or step <= 0:
            raise TraceError(f"{where}: local_bsz >= 1 and step_time > 0")
        by_shape.setdefault(shape, []).append((int(local), step))
    if not by_shape:
        raise TraceError(f"{path}: no placements")
    return Placements({k: sorted(v) for k, v in by_shape.items()})


def read_validation(folder: Path) -> dict[int, float]:
    """Total batch -> iterations after the last epoch, from ``validation-<batch>.csv``."""
    out: dict[int, float] = {}
    for path in sorted(folder.glob("validation-*.csv")):
        found = _VALIDATION.match(path.name)
        if found is None:
            continue
        rows = _open_csv(path)
        if not rows:
            raise TraceError(f"{path}: no epochs")
        out[int(found.group(1))] = _number(f"{path} line {len(rows) + 1}", rows[-1], "iteration")
    return out


def iterations_at(curves: Mapping[int, float], batch: int, where: str) -> float:
    """Iterations to the end of the curve at ``batch``, between the validated batches around it."""
    sizes = sorted(curves)
    if not sizes or not sizes[0] <= batch <= sizes[-1]:
        raise TraceError(f"{where}: batch {batch} lies outside the validated batches {sizes}")
    at = bisect.bisect_left(sizes, batch)
    if sizes[at] == batch:
        return curves[batch]
    lo, hi = sizes[at - 1], sizes[at]
    return ((batch - lo) * curves[hi] + (hi - batch) * curves[lo]) / (hi - lo)


def read_scalability(path: Path) -> Placements:
    """One ``scalability-<type>.csv``: step seconds by GPUs and servers (``"GPUs/servers"``)."""
    by_size: dict[str, list[tuple[int, float]]] = {}
    for number, row in enumerate(_open_csv(path), start=2):
        where = f"{path} line {number}"
        nodes = _number(where, row, "num_nodes")
        gpus = _number(where, row, "num_replicas")
        local = _number(where, row, "local_bsz")
        step = _number(where, row, "step_time")
        if not 1 <= nodes <= gpus or nodes != int(nodes) or gpus != int(gpus):
            raise TraceError(f"{where}: num_nodes and num_replicas must be 1 <= nodes <= GPUs")
        if local < 1 or step <= 0:
            raise TraceError(f"{where}: local_bsz >= 1 and step_time > 0")
        by_size.setdefault(f"{int(gpus)}/{int(nodes)}", []).append((int(local), step))
    return Placements({k: sorted(v) for k, v in by_size.items()})


@dataclass(frozen=True)
class Application:
    """What the profiles say about one application: placements and scalability per type,
    and its curves."""

    name: str
    placements: Mapping[str, Placements]
    curves: Mapping[int, float]
    scalability: Mapping[str, Placements] = field(default_factory=dict)


def read_application(profiles: Path, name: str, gpu_types: Sequence[str]) -> Application:
    folder = profiles / name
    if not folder.is_dir():
        raise TraceError(f"{profiles}: no profiles for application {name!r}")
    placements = {
        t: read_placements(folder / f"placements-{t}.csv")
        for t in gpu_types
        if (folder / f"placements-{t}.csv").is_file()
    }
    if not placements:
        raise TraceError(f"{folder}: no placements file for any GPU type of the cluster")
    curves = read_validation(folder)
    if not curves:
        raise TraceError(f"{folder}: no validation-<batch>.csv")
    scalability = {
        t: read_scalability(folder / f"scalability-{t}.csv")
        for t in placements
        if (folder / f"scalability-{t}.csv").is_file()
    }
    return Application(name, placements, curves, scalability)


def _gpu_caps(app: Application, batch: int, gpu_types: Sequence[str]) -> dict[str, int]:
    """Most GPUs of each type a job of ``batch`` can use: 0 where it has no profile."""
    caps: dict[str, int] = {}
    for t in gpu_types:
        table = app.placements.get(t)
        usable = table is not None and "1" in table.rows
        caps[t] = max(1, batch // table.min_local_bsz) if table is not None and usable else 0
    return caps


def _params(app: Application, local: int, cluster: Cluster) -> float:
    """All-reduce volume fitted to the largest profiled one-node placement of each type."""
    fitted: list[float] = []
    for t, table in app.placements.items():
        one = table.step_time("1", local)
        server = max((n.gpus for n in cluster.nodes_of_type(t)), default=1)
        shapes = [int(s) for s in table.rows if len(s) == 1 and 1 < int(s) <= server]
        if one is None or not shapes:
            continue
        k = max(shapes)
        step = table.step_time(str(k), local)
        assert step is not None
        comm = fitted_comm_s(one, one / step)
        fitted.append(comm * cluster.gpu_types[t].b_link * k / (k - 1))
    return statistics.median(fitted) if fitted else 0.0


def _measured(app: Application, local: int, caps: Mapping[str, int]) -> dict[str, dict[str, float]]:
    """Samples/s Sia measured at ``local`` per GPU on each type, keyed as the truth's
    ``measured_throughput``: each placement (the orders of one shape averaged), its GPUs
    on its servers (the placements of as many averaged), then the scalability rows."""
    out: dict[str, dict[str, float]] = {}
    for t, table in app.placements.items():
        if caps.get(t, 0) <= 0:
            continue
        steps: dict[str, list[float]] = {}
        for shape in table.rows:
            gpus, step = sum(int(c) for c in shape), table.step_time(shape, local)
            if gpus < 2 or step is None:
                continue
            steps.setdefault(f"{gpus}/{len(shape)}", []).append(step)
            if len(shape) > 1:
                steps.setdefault(measured_key("+".join(shape)), []).append(step)
        extra = app.scalability.get(t, Placements({}))
        for size in extra.rows:
            gpus, step = int(size.split("/")[0]), extra.step_time(size, local)
            if gpus > 1 and step is not None:
                steps.setdefault(size, [step])  # where no placement measured as many
        measured = {k: _gpus(k) * local / statistics.fmean(v) for k, v in steps.items()}
        if measured:
            out[t] = measured
    return out


def _gpus(key: str) -> int:
    """GPUs of a ``"N/K"`` or ``"A+B+..."`` placement key."""
    return sum(int(c) for c in key.split("+")) if "+" in key else int(key.split("/")[0])


def _demands(job: SiaJob, caps: Mapping[str, int], cluster: Cluster) -> tuple[int, ...]:
    if job.category == "rigid":
        return (job.num_replicas,)
    usable = [t for t, cap in caps.items() if cap > 0]
    step = min((n.gpus for n in cluster.nodes if n.gpu_type in usable), default=1)
    largest = max(
        (min(caps[t], cluster.gpus_of_type(t)) for t in usable),
        default=0,
    )
    ladder = {1, 2, 4, *range(step, MAX_GPUS + 1, step)}
    return tuple(sorted({c for c in ladder if c <= largest} | {job.num_replicas}))


def sia_inputs(
    workload: str | Path, profiles: str | Path, cluster: Cluster
) -> tuple[dict[str, ModelSpec], list[JobSpec]]:
    """Models and jobs of a Sia workload on ``cluster`` (see the module docstring)."""
    rows = read_sia_workload(workload)
    folder = Path(profiles)
    types = sorted(cluster.gpu_types)
    apps = {name: read_application(folder, name, types) for name in {r.application for r in rows}}
    models: dict[str, ModelSpec] = {}
    jobs: list[JobSpec] = []
    for row in rows:
        app = apps[row.application]
        where = f"{workload}: job {row.name!r}"
        local = math.ceil(row.batch_size / row.num_replicas)
        caps = _gpu_caps(app, row.batch_size, types)
        key = f"{row.application} (batch {row.batch_size} on {row.num_replicas})"
        if key not in models:
            throughput = {}
            for t, cap in caps.items():
                step = app.placements[t].step_time("1", local) if cap > 0 else None
                if step is not None:
                    throughput[t] = local / step
            models[key] = ModelSpec(
                name=key,
                params=_params(app, local, cluster),
                batch_size=local,
                throughput=throughput,
                comm_scale=1.0,
                dataset="sia",
                restore_s=RESTORE_S.get(row.application, DEFAULT_RESTORE_S),
                max_gpus=caps,
                measured_throughput=_measured(app, local, caps),
            )
        demands = _demands(row, caps, cluster)
        if not any(demands[0] <= min(c, cluster.gpus_of_type(t)) for t, c in caps.items()):
            raise TraceError(f"{where}: no GPU type of the cluster can hold {demands[0]} GPUs")
        jobs.append(
            JobSpec(
                job_id=row.name,
                submit_time=row.time,
                demands=demands,
                total_samples=iterations_at(app.curves, row.batch_size, where) * row.batch_size,
                model=key,
            )
        )
    return models, jobs
