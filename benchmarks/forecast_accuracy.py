"""START, ETA and ``--test-only`` forecasts set beside the simulated outcome, offline.

The live benchmark (``benchmarks/predictions.py``) needs the Slurm test
cluster; this one asks the same questions of the simulator. A contended
workload (Poisson arrivals, small jobs) runs on an 18-GPU cluster like the
test cluster. Whenever the world's scheduling step planned, the forecast is
taken as hopsd takes it: :func:`hopsd.sim.forecast.forecast` from the snapshot
the step planned, the clock after it and the plan being enacted. When a job is
submitted, the forecast of it as a job asked about (``hops submit
--test-only``) is taken from the state at that instant. Once every job ended,
each prediction is judged as ``benchmarks/predictions.py`` judges it:
``|predicted - true| / max(true time to the event, one queue refresh)``; START
for a job waiting at the forecast (its next real start), ETA for a running one.
Every forecast is taken twice on the same state: without arrivals and with the
``recent`` arrival model, so the two are judged on the same world.

    .venv/bin/python benchmarks/forecast_accuracy.py [--seeds 1 2 3] [--jobs 40] [--json]

prints, per seed and pooled, each kind's median error and median signed error
(negative: predicted early) for both models, and their ratio (recent / none).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hopsd.core.act import Act
from hopsd.core.model import GpuType, Plan
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import IDLE, StepResult
from hopsd.plugins import get_policy
from hopsd.sim.arrivals import ArrivalModel, PastArrival
from hopsd.sim.cluster import NodeGroup, build_sim_cluster
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.forecast import ForecastInput, Hypothetical, Predicted, forecast
from hopsd.sim.run import build_truth
from hopsd.sim.state import JobState
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec, SizeClass, WorkloadSpec, generate
from hopsd.solver_banner import silence_solver_banner

QUEUE_REFRESH_S = 30.0
#: Small jobs (minutes to a few hours of GPU time) on few GPUs, as the test cluster runs.
CLASSES = (
    SizeClass("S", 0.45, 0.05, 0.5, (1, 2), (1, 2)),
    SizeClass("M", 0.40, 0.5, 3.0, (1, 2), (2, 4)),
    SizeClass("L", 0.15, 3.0, 10.0, (2, 4), (4, 8)),
)
MODELS = {"none": ArrivalModel("none"), "recent": ArrivalModel("recent")}


def small_cluster(seed: int) -> GroundTruth:
    """18 GPUs of three types (2 + 8 + 8), as the test cluster has."""
    types = [
        GpuType("GTX1080Ti", 2.5e9, 3.1e8, 1.0),
        GpuType("TitanXP", 2.5e9, 3.1e8, 1.1),
        GpuType("RTX3090", 4.0e9, 7.8e8, 2.5),
    ]
    groups = [
        NodeGroup("gtx-", 1, "GTX1080Ti", 2),
        NodeGroup("titan-", 2, "TitanXP", 4),
        NodeGroup("rtx-", 2, "RTX3090", 4),
    ]
    return build_truth(build_sim_cluster(types, groups, seed))


@dataclass
class Said:
    """One prediction: of what (start, eta, test), of which job, when, and the time."""

    kind: str
    job_id: str
    made_at: float
    at: float
    model: str


class Watched(Engine):
    """The world: an engine that takes hopsd's forecasts as it goes and remembers starts."""

    def __init__(
        self,
        truth: GroundTruth,
        jobs: Sequence[JobSpec],
        config: EngineConfig,
        models: Mapping[str, ArrivalModel],
    ) -> None:
        self.models = models
        self.said: list[Said] = []
        self.starts: dict[str, list[float]] = defaultdict(list)
        self.forecast_s: dict[str, list[float]] = defaultdict(list)
        super().__init__(truth, jobs, get_policy("hops"), config)

    def _step(self, changed: bool) -> StepResult:
        snap = self._snapshot(pinned=False)
        step = super()._step(changed)
        if step.kind != IDLE:
            self._foresee(snap, step)
        return step

    def _apply(self, plan: Plan, actions: Sequence[Act] = ()) -> None:
        for a in plan.start:
            self.starts[a.job_id].append(self.now)
        super()._apply(plan, actions)

    def _arrive(self, job: JobState) -> None:
        if job.spec.job_id not in self.resumed:
            self._ask(job)
        super()._arrive(job)

    def _input(self, snap: Snapshot, step: StepResult | None, model: ArrivalModel) -> ForecastInput:
        clock = step.clock if step is not None else self.clock
        return ForecastInput(
            snap,
            clock,
            self.policy.name,
            self.settings,
            self.step_options,
            adoption_s=self.config.adoption_s,
            profile_s=self.config.profile_s,
            plan=step.plan if step is not None else None,
            arrivals=model,
            ended=tuple(self._ended()),
        )

    def _ended(self) -> list[PastArrival]:
        """Jobs that ended (what the ledger keeps of them): their shape, their service."""
        return [
            PastArrival(
                j.spec.submit_time,
                j.spec.demands,
                j.attained_service,
                j.spec.user,
                j.batch_size,
                j.model.params,
            )
            for j in self.jobs
            if j.status == "done"
        ]

    def _timed(
        self, given: ForecastInput, extra: Sequence[Hypothetical] = ()
    ) -> dict[str, Predicted]:
        began = time.perf_counter()
        out = forecast(given, extra)
        self.forecast_s[given.arrivals.mode].append(time.perf_counter() - began)
        return out

    def _foresee(self, snap: Snapshot, step: StepResult) -> None:
        waiting = {j.id for j in snap.queued} | {p.job_id for p in snap.profiling}
        running = {j.id for j in snap.running}
        started = {a.job_id for a in step.plan.start}
        for name, model in self.models.items():
            for p in self._timed(self._input(snap, step, model)).values():
                if p.job_id in waiting and p.job_id not in started and p.start_at is not None:
                    self.said.append(Said("start", p.job_id, self.now, p.start_at, name))
                if p.job_id in running and p.job_id not in step.plan.preempt and p.end_at:
                    self.said.append(Said("eta", p.job_id, self.now, p.end_at, name))

    def _ask(self, job: JobState) -> None:
        """``hops submit --test-only`` of the job just before it is submitted."""
        snap = self._snapshot(pinned=False)
        rates = {t: self.truth.single_gpu(job.spec.model, t) for t in self.cluster.gpu_types}
        ahead = [
            Hypothetical(
                j.spec.job_id,
                j.spec.demands,
                j.spec.total_samples,
                rates,
                j.batch_size,
                j.model.params,
                j.spec.user,
                max(self.now - j.spec.submit_time, 1e-3),
            )
            for j in self.active.values()
            if j.status == "arriving"
        ]
        asked = Hypothetical(
            job.spec.job_id,
            job.spec.demands,
            job.spec.total_samples,
            rates,
            job.batch_size,
            job.model.params,
            job.spec.user,
        )
        for name, model in self.models.items():
            p = self._timed(self._input(snap, None, model), [*ahead, asked])[job.spec.job_id]
            if p.end_at is not None:
                self.said.append(Said("test", job.spec.job_id, self.now, p.end_at, name))


def world(seed: int, n_jobs: int, per_hour: float) -> Watched:
    truth = small_cluster(seed)
    jobs = generate(WorkloadSpec(n_jobs, per_hour, CLASSES, max_gpus=8), truth, seed)
    config = EngineConfig(adoption_s=QUEUE_REFRESH_S, seed=seed, spare_guard_s=60.0)
    return Watched(truth, jobs, config, MODELS)


def _true_at(w: Watched, s: Said) -> float | None:
    job = w.by_id[s.job_id]
    if s.kind == "start":
        return min((t for t in w.starts.get(s.job_id, []) if t >= s.made_at), default=None)
    return job.finish_time


Errors = dict[tuple[str, str], list[float]]


def judge(w: Watched, last_submit: float) -> Errors:
    """Each prediction's signed error by model and kind (and before/after the last arrival)."""
    errors: Errors = defaultdict(list)
    for s in w.said:
        true = _true_at(w, s)
        if true is None:
            continue
        signed = (s.at - true) / max(true - s.made_at, QUEUE_REFRESH_S)
        errors[(s.model, s.kind)].append(signed)
        if s.kind != "test":
            phase = "after" if s.made_at >= last_submit else "before"
            errors[(s.model, f"{s.kind}_{phase}_arrivals")].append(signed)
    return errors


def figures(errors: Errors) -> dict[str, dict[str, Any]]:
    """Median |error| and median signed error (negative: early), with the ratio."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for (model, kind), values in sorted(errors.items()):
        out[model][kind] = {
            "n": len(values),
            "median_error": round(statistics.median(abs(v) for v in values), 3),
            "median_signed": round(statistics.median(values), 3),
        }
    out["ratio"] = {
        k: round(out["recent"][k]["median_error"] / f["median_error"], 3)
        if f["median_error"] > 0
        else None
        for k, f in out.get("none", {}).items()
        if k in out.get("recent", {})
    }
    return dict(out)


def one_seed(seed: int, n_jobs: int, per_hour: float) -> tuple[dict[str, Any], Errors]:
    w = world(seed, n_jobs, per_hour)
    w.run()
    errors = judge(w, max(j.spec.submit_time for j in w.jobs))
    summary = {
        "seed": seed,
        "figures": figures(errors),
        "forecast_s": {name: _spread(took) for name, took in w.forecast_s.items()},
    }
    return summary, errors


def _spread(took: Sequence[float]) -> dict[str, float]:
    """How many forecasts, and their median, 90th percentile and longest wall time."""
    ordered = sorted(took)
    return {
        "n": len(ordered),
        "median": round(statistics.median(ordered), 4),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 4),
        "max": round(ordered[-1], 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--per-hour", type=float, default=12.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    silence_solver_banner()
    runs = [one_seed(s, args.jobs, args.per_hour) for s in args.seeds]
    every: Errors = defaultdict(list)
    for _, errors in runs:
        for key, values in errors.items():
            every[key].extend(values)
    report = {"seeds": [summary for summary, _ in runs], "pooled": figures(every)}
    print(json.dumps(report) if args.json else table(report))
    return 0


def table(report: Mapping[str, Any]) -> str:
    """One line per kind: median |error| without and with arrivals, their ratio, bias."""
    lines = []
    for s in report["seeds"]:
        for name, t in s["forecast_s"].items():
            lines.append(
                f"seed {s['seed']} {name}: {t['n']} forecasts, median {t['median']} s, "
                f"p90 {t['p90']} s, max {t['max']} s"
            )
    lines.append(f"{'pooled':28} {'none':>14} {'recent':>14} {'ratio':>6}")
    pooled = report["pooled"]
    for kind, none in pooled.get("none", {}).items():
        recent = pooled["recent"][kind]
        lines.append(
            f"{kind:22} n={none['n']:<4} {none['median_error']:6.3f} ({none['median_signed']:+.3f})"
            f" {recent['median_error']:6.3f} ({recent['median_signed']:+.3f})"
            f" {pooled['ratio'][kind] or float('nan'):6.3f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
