"""``hops show JOBID``: one job's whole story (like ``scontrol show job``).

Tag, demands, throughput estimates per type with where each came from, LR and
FTF rho, queue position, START and ETA (hopsd's forecast), placements and restarts over time,
each Slurm run (as ``sacct -D`` lists them: start, end, nodes, and why it
ended: completed, moved, preempted, profiling over, failed), and refusals (the
tag's reason, a refused input, the last state reason).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from hops_cli.common import config_of, fail, print_json
from hops_cli.filters import parse_job_refs, slurm_job_ids
from hops_cli.output_options import AsJson
from hopsd.views.cells import duration


def _stamp(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_show(job: dict[str, Any]) -> None:
    """``key=value`` lines grouped as ``scontrol show job`` does, then the placement story."""
    lines = [
        f"JobId={job['job_id']} Name={job['name']} User={job['user']} Account={job['account']}",
        f"   State={job['state']} Reason={job['reason'] or '-'}",
        f"   Tag={job['tag']['status']}"
        + (f" TagReason={job['tag']['reason']}" if job["tag"]["reason"] else "")
        + (f" Problem={job['problem']}" if job["problem"] else ""),
        f"   Demands={','.join(map(str, job['demands']))} Model={job['model']} "
        f"BatchSize={job['batch_size']} "
        f"Samples={job['samples_done']:.0f}/{job['total_samples']:.0f}",
        f"   Submit={_stamp(job['submit_time'])} Start={_stamp(job['start_time'])} "
        f"End={_stamp(job['end_time'])}",
        f"   Wait={duration(job['wait_s'])} Elapsed={duration(job['elapsed_s'])} "
        f"Restarts={job['restarts']}",
        f"   LR={_num(job['latency_ratio'])} FTFrho={_num(job['ftf_rho'])} "
        f"QueuePosition={job['queue_position'] or '-'} "
        f"StartIn={duration(job['start_in_s'])} ETA={duration(job['eta_s'])}",
        f"   EstimateSource={job['estimate_source'] or '-'}",
    ]
    for place, est in job["estimates"].items():
        sizes = " ".join(f"{n}gpu:{v:g}/s" for n, v in est["per_gpu"].items())
        lines.append(f"   Estimate[{place}]={sizes} ({est['source']})")
    for step in job["placements"]:
        where = ",".join(f"{n}:{g}" for n, g in step["nodes"].items()) or "-"
        lines.append(
            f"   {_stamp(step['at'])} {step['change']:<7} {step['gpu_type'] or '-'} {where}"
        )
    lines.extend(_run_line(run) for run in job.get("runs", []))
    if job["state_reason"]:
        lines.append(f"   StateReason={job['state_reason']}")
    if job.get("size_doubt"):
        lines.append(f"   SizeClaim={job['size_doubt']}")
    if job["daemon"]["mode"] != "running":
        lines.append(f"   hopsd: {job['daemon']['mode']}")
    typer.echo("\n".join(lines))


def _run_line(run: dict[str, Any]) -> str:
    """``Run=1 Kind=run Nodes=a100n1:2 Start=... End=... Elapsed=... Ended=moved``,
    as ``sacct -D`` lists a job's runs."""
    where = ",".join(f"{n}:{g}" for n, g in run["nodes"].items()) or "-"
    ended = run["ended"] or "running"
    if run["exit_code"]:
        ended += f" (exit {run['exit_code']})"
    return (
        f"   Run={run['run']} Kind={run['kind']} Type={run['gpu_type'] or '-'} Nodes={where} "
        f"Start={_stamp(run['start_time'])} End={_stamp(run['end_time'])} "
        f"Elapsed={duration(run['elapsed_s'])} Ended={ended}"
    )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def show(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="The Slurm job id (26 or 26_1).")],
    as_json: AsJson = False,
) -> None:
    """Everything hops knows about one job: tag, demands, estimates, LR, placements, refusals."""
    from hops_cli.ledger_access import reading
    from hopsd.views.jobshow import show_payload

    config = config_of(ctx)
    found = slurm_job_ids(parse_job_refs([job_id]), config)
    payload = None
    if found:
        with reading(config) as unit:
            payload = show_payload(unit, next(iter(found)))
    if payload is None:
        fail(f"no such hops job: {job_id}")
    elif as_json:
        print_json(payload)
    else:
        render_show(payload)
