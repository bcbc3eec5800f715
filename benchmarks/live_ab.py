"""hops against plain Slurm, live: one mixed workload run through each, JCTs from sacct.

The same jobs (same training script, samples, per-type speeds and arrival
times) run twice on the live Slurm test cluster, once per arm, and each job's
completion time is read from Slurm's accounting the same way for both:

* **slurm**: every job is a plain ``sbatch --gpus=N -p <its types>`` job; hopsd
  does not run and no job carries a hops tag, so Slurm's own priority and
  backfill scheduling place them. ``N`` is what a user would type for a job
  that can run on any count of its demand set but must pick one: the
  *largest* count by default (``--slurm-gpus largest``: the user asks for the
  most GPUs the job scales to, to finish soonest), or the smallest
  (``--slurm-gpus smallest``: the user asks for what starts soonest). The
  partitions are the job's allowed GPU types (one type per partition on the
  test cluster), fastest first, as a user who knows the cluster lists them;
  Slurm starts a multi-partition job in the first one that can take it, so a
  job never mixes GPU types, as under hops.
* **hops**: every job is submitted as a hops job (held, tagged with its demand
  set, samples, batch, model and allowed types) and hopsd, ticking in this
  process every ``queue_refresh_s``, schedules it.

JCT = the job's last ``End`` - its first ``Submit`` over every run ``sacct -D``
lists (a requeued job has one record per run). Per run the benchmark prints
each arm's average and p99 JCT and hops/slurm ratios; the two arms' order
alternates between runs, so neither always runs on a fresher machine:

    eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/live_ab.py [--runs 3] [--scale 3] [--json] \\
        [--spread 1] [--round-s 8] [--slurm-gpus largest]

hopsd runs on the live tests' hops.conf (8 s rounds, 1 s queue refresh);
``--round-s`` sets a longer round for jobs that last minutes. ``--json`` prints
``{"jobs", "scale", "spread", "slurm_gpus", "round_s", "every_run_meets_goal", "runs"}``,
each run with both arms' ``avg_jct_s``/``p99_jct_s``, ``avg_ratio``,
``p99_ratio``, ``meets_goal``, the load averages before and after each arm, and
per job both arms' JCT, first wait, runs (requeues + 1) and last placement.

Goal: in every run hops's average JCT <= 0.7 x plain Slurm's and its p99 no
worse (ratio <= 1.0). p99 is numpy's linear-interpolated 99th percentile, so on
a workload of ~20 jobs it sits just under the longest JCT.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "daemon"))

from daemon_live import PYTHON, TRAIN_JOB, LiveEnv
from live_replay import Arrival, benchmark_env, live_arguments, quietly, scaled

from hopsd.daemon.tick import Tick
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

#: The test cluster's GPU types, fastest first (the partition order a user would type).
TYPE_ORDER = ("a100", "v100", "k80")
#: Per-type speed factors of each model's synthetic job (train_job.py ``--type-speed``;
#: k80 1, v100 2, a100 4 where not given) and its per-GPU batch.
MODELS: dict[str, tuple[str, int]] = {
    "resnet50": ("", 32),
    "bert": ("k80=0.7,v100=2.5,a100=6", 32),
    "lstm": ("v100=1.3,a100=1.6", 64),
    "gpt2": ("k80=0.5,v100=2,a100=5", 16),
}
#: Minutes of every job's time limit (``sbatch -t``), the same in both arms.
TIME_LIMIT_MIN = 10
#: Slurm states of a job that will not run any more.
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}
SACCT_FIELDS = ("JobIDRaw", "State", "Submit", "Start", "End", "Partition", "AllocTRES")


@dataclass(frozen=True)
class AbJob:
    """One job of the A/B workload: its arrival (samples, demand set, speeds) and model.

    ``types`` are the only GPU types it may run on (none: any), e.g. a model that
    does not fit a k80's memory.
    """

    arrival: Arrival
    model: str
    types: tuple[str, ...] = ()

    @property
    def batch(self) -> int:
        return MODELS[self.model][1]


def job(
    at_s: float, model: str, demands: tuple[int, ...], samples: float, types: tuple[str, ...] = ()
) -> AbJob:
    return AbJob(Arrival(at_s, demands, samples, MODELS[model][0]), model, types)


#: 18 jobs of four models and eight demand sets arriving over 45 s (times --scale) on
#: the 18-GPU test cluster: contended while they arrive, then draining.
WORKLOAD = [
    job(0, "resnet50", (1, 2), 6000),
    job(0, "bert", (2, 4), 16000),
    job(2, "lstm", (1,), 3000),
    job(3, "gpt2", (4,), 14000, ("v100", "a100")),
    job(5, "resnet50", (1, 2, 4), 12000),
    job(7, "lstm", (2,), 5000),
    job(9, "bert", (1, 2), 6000),
    job(12, "resnet50", (4,), 16000),
    job(14, "gpt2", (2, 4), 10000, ("v100", "a100")),
    job(17, "lstm", (1, 2), 4000),
    job(20, "bert", (2, 4), 12000),
    job(23, "resnet50", (1,), 3000),
    job(26, "gpt2", (1, 2), 6000, ("v100", "a100")),
    job(30, "lstm", (1,), 2500),
    job(33, "bert", (4,), 14000),
    job(37, "resnet50", (2, 4), 10000),
    job(41, "lstm", (1, 2), 5000),
    job(45, "gpt2", (2,), 6000, ("v100", "a100")),
]


def scaled_jobs(jobs: Sequence[AbJob], scale: float, spread: float = 1.0) -> list[AbJob]:
    """Every job's samples and arrival time multiplied by ``scale``, arrival times then by
    ``spread`` (below 1: the same jobs arrive closer together, contending more)."""
    arrivals = scaled([j.arrival for j in jobs], scale)
    return [
        AbJob(dataclasses.replace(a, at_s=a.at_s * spread), j.model, j.types)
        for a, j in zip(arrivals, jobs, strict=True)
    ]


def slurm_gpus(demands: Sequence[int], choice: str) -> int:
    """The one GPU count a plain Slurm user types for a job of this demand set."""
    if choice == "largest":
        return max(demands)
    if choice == "smallest":
        return min(demands)
    raise ValueError(f"--slurm-gpus {choice!r} is neither largest nor smallest")


def partitions(types: Sequence[str]) -> str:
    """``-p`` of a plain job: its allowed types' partitions (all: every type), fastest first."""
    return ",".join(t for t in TYPE_ORDER if not types or t in types)


def job_script(j: AbJob, spool: Path) -> str:
    """The batch script of a job, the same in both arms but for the spool it reports to."""
    a = j.arrival
    return (
        "#!/bin/bash\n"
        f"export HOPS_SPOOL_DIR={spool}\n"
        f"exec {PYTHON} {TRAIN_JOB} --samples {a.samples:g} --batch {j.batch} "
        f"--type-speed '{a.type_speed}'\n"
    )


def common_args(name: str, out: Path) -> list[str]:
    """sbatch options both arms give: name, output, time limit."""
    return ["-J", name, "-o", str(out), "--open-mode=append", "-t", str(TIME_LIMIT_MIN)]


def sbatch_argv(j: AbJob, name: str, out: Path, script: Path, choice: str) -> list[str]:
    """The plain Slurm arm's ``sbatch`` command of a job."""
    gpus = slurm_gpus(j.arrival.demands, choice)
    return [
        "sbatch",
        "--parsable",
        *common_args(name, out),
        "-p",
        partitions(j.types),
        f"--gpus={gpus}",
        str(script),
    ]


def hops_tag(j: AbJob) -> HopsTag:
    """The hops arm's tag of a job: demand set, samples, batch, model, allowed types."""
    a = j.arrival
    return HopsTag(a.demands, a.samples, j.batch, model=j.model, types=j.types)


# ------------------------------------------------------------------ accounting


def _epoch(text: str) -> float | None:
    """sacct's local ISO time as epoch seconds (None: Unknown / None / empty)."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _gpus(tres: str) -> tuple[str, int]:
    """GPU type and count of an AllocTRES (``gres/gpu:a100=4``); ("", 0) when none."""
    for item in tres.split(","):
        name, _, count = item.partition("=")
        if name.startswith("gres/gpu:") and count.isdigit():
            return name.split(":", 1)[1], int(count)
    return "", 0


def parse_sacct(text: str) -> dict[int, list[dict[str, str]]]:
    """``sacct -D -X --parsable2`` (header line first): every job's runs in sacct's order."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    header = lines[0].split("|")
    runs: dict[int, list[dict[str, str]]] = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        if row.get("JobIDRaw", "").isdigit():
            runs.setdefault(int(row["JobIDRaw"]), []).append(row)
    return runs


def _times(rows: Sequence[Mapping[str, str]], field: str) -> list[float]:
    return [t for t in (_epoch(r[field]) for r in rows) if t is not None]


def job_result(rows: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """One job's JCT (last End - first Submit), first wait, final state, runs, last placement.

    ``jct_s`` is None unless the job's last run completed: a failed job has no JCT.
    """
    submits, starts = _times(rows, "Submit"), _times(rows, "Start")
    last = rows[-1]
    end, start = _epoch(last["End"]), _epoch(last["Start"])
    kind, count = _gpus(last.get("AllocTRES", ""))
    done = last["State"].split()[0] == "COMPLETED" and end is not None and bool(submits)
    return {
        "state": last["State"],
        "jct_s": round(end - min(submits), 1) if done and end is not None else None,
        "wait_s": round(min(starts) - min(submits), 1) if starts and submits else None,
        "last_run_s": round(end - start, 1) if end is not None and start is not None else None,
        "runs": len(rows),
        "gpu_type": kind,
        "gpus": count,
    }


def _stats(jcts: Sequence[float]) -> tuple[float, float]:
    values = np.asarray(jcts, dtype=float)
    return float(values.mean()), float(np.percentile(values, 99))


def summarise(jcts: Sequence[float]) -> dict[str, float]:
    """Average and p99 (linear-interpolated) JCT of an arm, seconds (rounded to 0.1 s)."""
    avg, p99 = _stats(jcts)
    return {"avg_jct_s": round(avg, 1), "p99_jct_s": round(p99, 1)}


def compare_arms(slurm: Sequence[float], hops: Sequence[float]) -> dict[str, Any]:
    """Both arms' figures, hops/slurm ratios (of the unrounded figures) and the goal."""
    (s_avg, s_p99), (h_avg, h_p99) = _stats(slurm), _stats(hops)
    avg_ratio, p99_ratio = h_avg / s_avg, h_p99 / s_p99
    return {
        "slurm": summarise(slurm),
        "hops": summarise(hops),
        "avg_ratio": round(avg_ratio, 3),
        "p99_ratio": round(p99_ratio, 3),
        "meets_goal": avg_ratio <= 0.7 and p99_ratio <= 1.0,
    }


def read_accounting(ids: Sequence[int], wait_s: float = 60.0) -> dict[int, dict[str, Any]]:
    """Every job's result from ``sacct -D -X``, once accounting knows each one's end."""
    argv = ["sacct", "-D", "-X", "--allusers", "--parsable2", "-o", ",".join(SACCT_FIELDS)]
    argv += ["-j", ",".join(str(i) for i in ids)]
    end = time.monotonic() + wait_s
    while True:
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30)
        runs = parse_sacct(out.stdout)
        settled = all(
            i in runs and runs[i][-1]["State"].split()[0] in FINAL and _epoch(runs[i][-1]["End"])
            for i in ids
        )
        if settled or time.monotonic() > end:
            return {i: job_result(runs[i]) for i in ids if i in runs}
        time.sleep(2.0)


# ------------------------------------------------------------------ the two arms


def _due(jobs: Sequence[AbJob], index: int, start: float) -> bool:
    return index < len(jobs) and time.time() - start >= jobs[index].arrival.at_s


def _unfinished(ids: Sequence[int]) -> set[int]:
    """Those of ``ids`` that Slurm still has pending, running or completing."""
    argv = ["squeue", "-h", "-t", "PD,R,CG,CF,S,RQ,RS,SE", "-o", "%i", "-j"]
    out = subprocess.run([*argv, ",".join(map(str, ids))], capture_output=True, text=True)
    return {int(x) for x in out.stdout.split() if x.isdigit()} & set(ids)


def run_slurm(env: LiveEnv, jobs: Sequence[AbJob], choice: str, deadline_s: float) -> list[int]:
    """Submit every job as a plain ``sbatch`` on schedule; wait until Slurm ran them all.

    Only ``env``'s directory and job list are used (cleanup cancels what is left):
    no hopsd ticks, and the jobs carry no hops tag.
    """
    root = env.root
    spool = root / "slurm-spool"
    spool.mkdir(parents=True, exist_ok=True)
    prefix = f"{env.prefix}slurm-"
    ids = env.submitted
    start = time.time()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        while _due(jobs, len(ids), start):
            j = jobs[len(ids)]
            script = root / f"s{len(ids)}.sh"
            script.write_text(job_script(j, spool))
            argv = sbatch_argv(j, f"{prefix}{len(ids)}", root / "%j.out", script, choice)
            out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30)
            ids.append(int(out.stdout.strip().split(";")[0]))
        if len(ids) == len(jobs) and not _unfinished(ids):
            return list(ids)
        time.sleep(1.0)
    raise SystemExit(f"slurm arm not finished within {deadline_s:.0f} s")


def run_hops(env: LiveEnv, jobs: Sequence[AbJob], deadline_s: float) -> list[int]:
    """Submit every job as a hops job on schedule; tick hopsd until every one ended."""
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    start = time.time()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        began = time.monotonic()
        while _due(jobs, len(env.submitted), start):
            index = len(env.submitted)
            j = jobs[index]
            script = env.root / f"h{index}.sh"
            script.write_text(job_script(j, env.spool))
            args = common_args(f"{env.prefix}{index}", env.root / "%j.out")
            request = SubmitRequest(str(script), sbatch_args=args, tag=hops_tag(j))
            env.submitted.append(env.port.submit(request))
        tick.run_once()
        if len(env.submitted) == len(jobs) and env.all_terminal():
            return list(env.submitted)
        time.sleep(max(0.0, env.config.queue_refresh_s - (time.monotonic() - began)))
    raise SystemExit(f"hops arm not finished within {deadline_s:.0f} s")


def load() -> str:
    """The machine's load averages (1, 5, 15 min), as ``uptime`` shows them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_run(
    jobs: Sequence[AbJob], choice: str, hops_first: bool, keep: str | None, round_s: float
) -> dict[str, Any]:
    """Both arms of one run, in the given order; per-job rows and the figures."""
    results: dict[str, dict[int, dict[str, Any]]] = {}
    ids: dict[str, list[int]] = {}
    loads: dict[str, str] = {}
    for arm in ("hops", "slurm") if hops_first else ("slurm", "hops"):
        began = load()
        with benchmark_env(keep and f"{keep}-{arm}", f"hops-live-ab-{arm}-", round_s) as env:
            if arm == "hops":
                ids[arm] = quietly(lambda env=env: run_hops(env, jobs, 1500))
            else:
                ids[arm] = run_slurm(env, jobs, choice, 1500)
            results[arm] = read_accounting(ids[arm])
        loads[arm] = f"{began} -> {load()}"
    jct = {arm: [results[arm].get(i, {}).get("jct_s") for i in ids[arm]] for arm in ids}
    per_job = [
        {
            "job": n,
            "model": j.model,
            "demands": list(j.arrival.demands),
            "types": list(j.types),
            "at_s": round(j.arrival.at_s, 2),
            "slurm": results["slurm"].get(ids["slurm"][n], {}),
            "hops": results["hops"].get(ids["hops"][n], {}),
        }
        for n, j in enumerate(jobs)
    ]
    failed = {arm: sum(v is None for v in values) for arm, values in jct.items()}
    figures = compare_arms(
        [v for v in jct["slurm"] if v is not None], [v for v in jct["hops"] if v is not None]
    )
    # a job that did not complete counts against its arm's claim: no goal met with one
    figures["meets_goal"] = figures["meets_goal"] and not any(failed.values())
    return {**figures, "failed_jobs": failed, "load": loads, "per_job": per_job}


def _line(n: int, run: Mapping[str, Any]) -> str:
    s, h = run["slurm"], run["hops"]
    return (
        f"run {n}: slurm avg {s['avg_jct_s']:7.1f} s p99 {s['p99_jct_s']:7.1f} s | "
        f"hops avg {h['avg_jct_s']:7.1f} s p99 {h['p99_jct_s']:7.1f} s | "
        f"hops/slurm avg {run['avg_ratio']:.3f} p99 {run['p99_ratio']:.3f} "
        f"{'meets' if run['meets_goal'] else 'MISSES'} goal (failed {run['failed_jobs']}; "
        f"load slurm {run['load']['slurm']}, hops {run['load']['hops']})"
    )


def _job_line(row: Mapping[str, Any]) -> str:
    def arm(r: Mapping[str, Any]) -> str:
        return (
            f"{r.get('jct_s')!s:>6} s (wait {r.get('wait_s')!s:>6}, runs {r.get('runs')}, "
            f"{r.get('gpus')}x{r.get('gpu_type')})"
        )

    return (
        f"  job {row['job']:>2} {row['model']:<8} {tuple(row['demands'])!s:<10} "
        f"at {row['at_s']:6.1f}: slurm {arm(row['slurm'])} | hops {arm(row['hops'])}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of both arms")
    parser.add_argument("--scale", type=float, default=3.0, help="multiply samples and arrivals")
    parser.add_argument(
        "--slurm-gpus",
        choices=("largest", "smallest"),
        default="largest",
        help="the count of a job's demand set a plain Slurm user types",
    )
    parser.add_argument(
        "--spread",
        type=float,
        default=1.0,
        help="multiply arrival times once more (below 1: denser arrivals, more contention)",
    )
    parser.add_argument(
        "--round-s",
        type=float,
        default=8.0,
        help="hopsd's round length (default: the live tests' 8 s)",
    )
    args = live_arguments(parser, "keep each arm's files in KEEP-runN-ARM directories")
    if args is None:
        return 2
    jobs = scaled_jobs(WORKLOAD, args.scale, args.spread)
    runs: list[dict[str, Any]] = []
    for n in range(args.runs):
        keep = args.keep and f"{args.keep}-run{n}"
        runs.append(one_run(jobs, args.slurm_gpus, n % 2 == 1, keep, args.round_s))
        if not args.json:
            print(_line(n, runs[-1]), flush=True)
    summary = {
        "jobs": len(jobs),
        "scale": args.scale,
        "spread": args.spread,
        "slurm_gpus": args.slurm_gpus,
        "round_s": args.round_s,
        "every_run_meets_goal": all(r["meets_goal"] for r in runs),
        "runs": runs,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for n, run in enumerate(runs):
        print(f"run {n} per job (JCT, first wait, runs, last placement):")
        for row in run["per_job"]:
            print(_job_line(row))
    print(f"every run meets goal (avg <= 0.7x, p99 <= 1.0x): {summary['every_run_meets_goal']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
