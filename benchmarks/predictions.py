"""START, ETA and ``hops submit --test-only`` set beside what really happened.

hopsd (in process, the daemon's own tick) schedules the live-vs-replay workload
on the live Slurm test cluster. Before each job is submitted, the benchmark
asks what ``hops submit --test-only`` would print for it (one job a tick: hopsd
keeps scheduling while the questions are answered, ``test_only_asked_s`` says
how long each took); while the workload
runs, hopsd records every START and ETA it shows (the ledger's predictions).
When every job has ended, each prediction is compared with the run Slurm
really started and the end the job really had:

    eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/predictions.py [--workload contended] [--scale 3] [--json]

prints ``{"jobs", "start_median_error", "eta_median_error",
"test_only_median_error"}``: each the median of ``|predicted - true| / true``
where *true* is the time from the prediction to the event (the true wait for
START, the true remaining time for ETA, the true time to finish for
``--test-only``), with the counts and the per-job first predictions beside.
A true time under one hopsd tick is taken as one tick (a prediction cannot be
judged finer than hopsd sees). The ``*_after_arrivals`` figures take only the
predictions made once the last job was submitted: no forecast knows of jobs
not yet submitted, and those figures show what is left once none come.
Goal: each <= 0.25.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "daemon"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_live import LiveEnv
from live_replay import Arrival, benchmark_env, live_arguments, quietly, scaled
from live_vs_replay import WORKLOAD

from hopsd.daemon.test_only import test_only_payload
from hopsd.daemon.tick import Tick
from hopsd.ledger.records import JobRecord, JobRun, Prediction
from hopsd.ledger.unit import Ledger
from hopsd.slurm.tag import HopsTag

WAITING = {"submitted", "queued", "preempted", "requeued", "profiling"}

#: More GPUs asked for than the 18-GPU test cluster has, from the first seconds on:
#: jobs wait, so START is foreseen (and judged) for many of them.
CONTENDED = [
    Arrival(0, (4,), 16000),
    Arrival(0, (4,), 16000),
    Arrival(1, (4,), 12000),
    Arrival(1, (2, 4), 12000),
    Arrival(2, (2,), 8000),
    Arrival(2, (4,), 16000, "a100=6"),
    Arrival(3, (1, 2), 6000),
    Arrival(3, (4,), 12000),
    Arrival(4, (2, 4), 10000),
    Arrival(5, (1,), 4000),
    Arrival(6, (4,), 12000),
    Arrival(8, (2,), 6000),
]
WORKLOADS = {"replay": WORKLOAD, "contended": CONTENDED}


def _ask(env: LiveEnv, a: Arrival, arrivals: str | None) -> dict[str, Any]:
    """What ``hops submit --test-only`` says of the job, just before it is submitted
    (``arrivals``: the ``[forecast] test_only_arrivals`` to ask with, else hops.conf's)."""
    config = env.config
    if arrivals is not None:
        config = dataclasses.replace(config, forecast_test_only_arrivals=arrivals)
    with Ledger(env.sessions).reading() as unit:
        payload = test_only_payload(
            config, unit, env.port, HopsTag(a.demands, a.samples, 32), "bench"
        )
    return payload


def run(
    env: LiveEnv, workload: list[Arrival], deadline_s: float, arrivals: str | None = None
) -> dict[int, dict[str, Any]]:
    """Submit on schedule (asking --test-only first), tick until every job ended."""
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    pending = sorted(workload, key=lambda a: a.at_s)
    asked: dict[int, dict[str, Any]] = {}
    start = time.time()
    end = time.monotonic() + deadline_s
    index = 0
    while time.monotonic() < end:
        began = time.monotonic()
        # one due job per tick: the question takes a while (longer on a loaded machine),
        # and hopsd, a process of its own, does not wait for users' questions. Asking
        # every due job at once left the queue unscheduled until the last was submitted,
        # so each answer foresaw an idle cluster hopsd had not been allowed to fill.
        if index < len(pending) and time.time() - start >= pending[index].at_s:
            a = pending[index]
            asked_at = time.monotonic()
            said = _ask(env, a, arrivals)
            said["asked_s"] = time.monotonic() - asked_at
            job = env.submit(a.demands, a.samples, type_speed=a.type_speed, label=f"p{index}")
            asked[job] = said
            index += 1
        tick.run_once()
        if index == len(pending) and env.all_terminal():
            return asked
        time.sleep(max(0.0, env.config.queue_refresh_s - (time.monotonic() - began)))
    raise SystemExit(f"workload not finished within {deadline_s:.0f} s")


def _signed(predicted: float, true_at: float, made_at: float, floor_s: float) -> float:
    """The error as a fraction of the true time; positive: foreseen later than it came."""
    return (predicted - true_at) / max(true_at - made_at, floor_s)


#: Slurm keeps whole seconds: a run it shows starting at ``t`` began in ``[t, t + 1)``.
SLURM_RESOLUTION_S = 1.0


def _next_start(runs: list[JobRun], after: float) -> float | None:
    """Slurm's start of the job's first training run begun after ``after``.

    A run Slurm shows starting in the second ``after`` falls in counts: hopsd can
    release a job in the tick that adopted it, so a run often begins within the
    second of the prediction (or question) before it, and a start compared at whole
    seconds then looked earlier than the prediction, which was judged against the
    job's next run instead.
    """
    starts = [
        r.start_time for r in runs if r.kind == "run" and r.start_time + SLURM_RESOLUTION_S > after
    ]
    return min(starts, default=None)


def judge(env: LiveEnv, asked: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Every prediction against what happened (see the module docstring)."""
    floor_s = env.config.queue_refresh_s
    with Ledger(env.sessions).reading() as unit:
        jobs: dict[int, JobRecord] = unit.jobs_by_slurm_ids(list(asked))
        ids = [j.id for j in jobs.values()]
        said: dict[str, list[Prediction]] = dict(unit.job_predictions(ids))
        runs = unit.job_runs(ids)
    starts: list[float] = []
    etas: list[float] = []
    tests: list[float] = []
    bias: dict[str, list[float]] = {"start": [], "eta": [], "test_only": []}
    # the same, of predictions made once the last job was submitted: no arrival the
    # forecast could not know of came after them
    settled: dict[str, list[float]] = {"start": [], "eta": []}
    last_submit = max(j.submit_time for j in jobs.values())
    per_job: list[dict[str, Any]] = []
    for slurm_id, job in sorted(jobs.items()):
        if job.end_time is None or str(job.state) != "done":
            continue
        first_start = first_eta = None
        for p in said.get(job.id, []):
            if p.state in WAITING and p.start_at is not None:
                true = _next_start(runs.get(job.id, []), p.made_at)
                if true is not None:
                    bias["start"].append(_signed(p.start_at, true, p.made_at, floor_s))
                    starts.append(abs(bias["start"][-1]))
                    first_start = starts[-1] if first_start is None else first_start
                    if p.made_at >= last_submit:
                        settled["start"].append(starts[-1])
            if p.state == "running" and p.end_at is not None:
                bias["eta"].append(_signed(p.end_at, job.end_time, p.made_at, floor_s))
                etas.append(abs(bias["eta"][-1]))
                first_eta = etas[-1] if first_eta is None else first_eta
                if p.made_at >= last_submit:
                    settled["eta"].append(etas[-1])
        expected = asked[slurm_id].get("expected") or {}
        test_error = None
        made = float(asked[slurm_id]["made_at"])
        if expected.get("end_at") is not None:
            bias["test_only"].append(
                _signed(float(expected["end_at"]), job.end_time, made, floor_s)
            )
            test_error = abs(bias["test_only"][-1])
            tests.append(test_error)
        per_job.append(
            {
                "job": slurm_id,
                "jct_s": round(job.end_time - job.submit_time, 1),
                "first_start_error": _round(first_start),
                "first_eta_error": _round(first_eta),
                "test_only_error": _round(test_error),
                # what --test-only foresaw and what came, in seconds from the question
                "test_only_start_in_s": _round(expected.get("start_in_s")),
                "test_only_finish_in_s": _round(expected.get("finish_in_s")),
                "true_start_in_s": _round(_since(_next_start(runs.get(job.id, []), made), made)),
                "true_finish_in_s": _round(job.end_time - made),
                "test_only_asked_s": _round(asked[slurm_id].get("asked_s")),
            }
        )
    return {
        "jobs": len(per_job),
        "start_median_error": _median(starts),
        "eta_median_error": _median(etas),
        "test_only_median_error": _median(tests),
        "start_median_error_after_arrivals": _median(settled["start"]),
        "eta_median_error_after_arrivals": _median(settled["eta"]),
        "start_predictions_after_arrivals": len(settled["start"]),
        "eta_predictions_after_arrivals": len(settled["eta"]),
        "start_predictions": len(starts),
        "eta_predictions": len(etas),
        "test_only_predictions": len(tests),
        # the median signed error: negative, foreseen sooner than it came
        **{f"{key}_median_bias": _median(values) for key, values in bias.items()},
        "per_job": per_job,
    }


def _since(at: float | None, made_at: float) -> float | None:
    return None if at is None else at - made_at


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=3.0, help="multiply samples and arrivals")
    parser.add_argument(
        "--workload",
        choices=sorted(WORKLOADS),
        default="contended",
        help="contended: more GPUs asked for than there are; replay: live_vs_replay's",
    )
    parser.add_argument(
        "--test-only-arrivals",
        choices=("recent", "none"),
        help="ask --test-only with this arrival model instead of hops.conf's",
    )
    args = live_arguments(parser)
    if args is None:
        return 2
    workload = scaled(WORKLOADS[args.workload], args.scale)
    with benchmark_env(args.keep, "hops-predictions-") as env:
        asked = quietly(lambda: run(env, workload, 1200, args.test_only_arrivals))
        figures = judge(env, asked)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"jobs {figures['jobs']}")
    for key in ("start", "eta", "test_only"):
        value = figures[f"{key}_median_error"]
        shown = "-" if value is None else f"{value:.1%}"
        print(
            f"{key:<10} median error {shown:>7} over {figures[f'{key}_predictions']} (goal <= 25 %)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
