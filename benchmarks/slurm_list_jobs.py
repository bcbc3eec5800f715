"""How much one tick's job read costs with many queued jobs, per Slurm backend.

Submits N real, individual held jobs (not an array, so every listed record is
one job as hops sees it) on the live test cluster, then times ``list_jobs``
and counts the commands it ran through the run seam. Baseline measured in the
same run: reading jobs one ``scontrol show job -o ID`` call at a time (timed on
a sample, extrapolated to N). Every submitted job is cancelled at the end.

    SLURM_CONF=... .venv/bin/python benchmarks/slurm_list_jobs.py [--jobs 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.factory import pyslurm_unavailable_reason
from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import SlurmPort, SubmitRequest
from hopsd.slurm.runner import CountingRunner, SubprocessRunner
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((1, 2, 4), 1e6, 32, "bench", 25e6, (0.1,), "linear")


def submit_many(port: CliSlurm, count: int, workdir: Path) -> list[int]:
    script = workdir / "held.sh"
    script.write_text("#!/bin/sh\nsleep 1\n")
    args = ["-o", "/dev/null", "-J", "hops-bench"]
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [
            pool.submit(port.submit, SubmitRequest(str(script), sbatch_args=args, tag=TAG))
            for _ in range(count)
        ]
        return [f.result() for f in futures]


def cancel_all(job_ids: list[int]) -> None:
    run = SubprocessRunner()
    for start in range(0, len(job_ids), 200):
        chunk = [str(i) for i in job_ids[start : start + 200]]
        run(["scancel", *chunk], 120)


def time_list_jobs(port: SlurmPort, counter: CountingRunner | None, repeats: int) -> dict:
    walls, listed, calls = [], 0, []
    for _ in range(repeats):
        if counter is not None:
            counter.reset()
        started = time.perf_counter()
        jobs = port.list_jobs()
        walls.append(time.perf_counter() - started)
        listed = len(jobs)
        calls.append(len(counter.calls) if counter is not None else None)
    return {
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "jobs_listed": listed,
        "calls_per_list": calls[-1],
    }


def time_per_job_baseline(job_ids: list[int], sample: int) -> dict:
    run = SubprocessRunner()
    chosen = job_ids[:sample]
    started = time.perf_counter()
    for job_id in chosen:
        run(["scontrol", "show", "job", "-o", str(job_id)], 30)
    per_call = (time.perf_counter() - started) / max(len(chosen), 1)
    return {
        "per_call_s": per_call,
        "extrapolated_s": per_call * len(job_ids),
        "calls": len(job_ids),
        "sampled": len(chosen),
    }


def time_scontrol_detail(repeats: int) -> float:
    run = SubprocessRunner()
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        run(["scontrol", "show", "job", "-d", "-o"], 60)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def time_squeue_split() -> dict:
    """Where the CLI read's time goes: the squeue command vs hops's parsing."""
    started = time.perf_counter()
    out = SubprocessRunner()(["squeue", "--json"], 120).stdout
    fetched = time.perf_counter()
    parse_jobs(out)
    return {
        "command_s": fetched - started,
        "parse_s": time.perf_counter() - fetched,
        "reply_kib": len(out) // 1024,
    }


def max_job_count() -> int | None:
    out = SubprocessRunner()(["scontrol", "show", "config"], 30).stdout
    for line in out.splitlines():
        if line.startswith("MaxJobCount"):
            return int(line.split("=", 1)[1].strip())
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sample", type=int, default=50, help="per-job baseline sample size")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    opts = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        print("SLURM_CONF is not set: start the cluster with docker/cluster.sh up", file=sys.stderr)
        return 2
    result: dict = {"jobs_submitted": opts.jobs, "max_job_count": max_job_count()}
    counter = CountingRunner(SubprocessRunner())
    cli = CliSlurm(run=counter, timeout_s=120)
    job_ids: list[int] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            job_ids = submit_many(CliSlurm(timeout_s=120), opts.jobs, Path(tmp))
            result["submit_s"] = time.perf_counter() - started
        result["cli"] = time_list_jobs(cli, counter, opts.repeats)
        reason = pyslurm_unavailable_reason()
        if reason is None:
            from hopsd.slurm.pyslurm_backend import PyslurmSlurm

            result["pyslurm"] = time_list_jobs(PyslurmSlurm(), None, opts.repeats)
        else:
            result["pyslurm"] = {"skipped": reason}
        result["cli_split"] = time_squeue_split()
        result["scontrol_detail_one_call_s"] = time_scontrol_detail(opts.repeats)
        result["per_job_baseline"] = time_per_job_baseline(job_ids, opts.sample)
        base = result["per_job_baseline"]["extrapolated_s"]
        result["speedup_cli_vs_per_job"] = base / result["cli"]["median_s"]
    finally:
        cancel_all(job_ids)
    if opts.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


def print_table(r: dict) -> None:
    print(
        f"MaxJobCount {r['max_job_count']}; submitted {r['jobs_submitted']} held jobs "
        f"in {r['submit_s']:.1f} s"
    )
    cli = r["cli"]
    print(
        f"cli list_jobs: {cli['calls_per_list']} call(s), median {cli['median_s'] * 1e3:.0f} ms "
        f"(min {cli['min_s'] * 1e3:.0f} ms), {cli['jobs_listed']} jobs listed"
    )
    sp = r["cli_split"]
    print(
        f"  of which squeue --json {sp['command_s'] * 1e3:.0f} ms ({sp['reply_kib']} KiB), "
        f"parsing {sp['parse_s'] * 1e3:.0f} ms"
    )
    ps = r["pyslurm"]
    if "skipped" in ps:
        print(f"pyslurm list_jobs: skipped ({ps['skipped']})")
    else:
        print(f"pyslurm list_jobs: median {ps['median_s'] * 1e3:.0f} ms, {ps['jobs_listed']} jobs")
    print(
        f"scontrol show job -d -o (one call, for comparison): "
        f"{r['scontrol_detail_one_call_s'] * 1e3:.0f} ms"
    )
    b = r["per_job_baseline"]
    print(
        f"baseline one call per job: {b['per_call_s'] * 1e3:.1f} ms/call x {b['calls']} = "
        f"{b['extrapolated_s']:.1f} s (sampled {b['sampled']})"
    )
    print(f"batched cli list_jobs is {r['speedup_cli_vs_per_job']:.0f}x faster than per-job reads")


if __name__ == "__main__":
    sys.exit(main())
