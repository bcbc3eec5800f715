"""Wall time of the simulator: paper-512 under four policies, a 300-job 48-GPU trace under
Gavel, and a 10,000-job trace, each against an older version of hops measured in the same run.

Goals (2-core machine): the four paper-512 runs within 60 s one after the other,
the 300-job, 48-GPU trace under ``gavel`` within 6 s (what Gavel's own simulator
needs for such a trace), and hops's planning on the planning case within 3x of
Sia's.

The planning case (``--plan-gpus 256 --plan-jobs 640``) is paper-512 scaled: the
same five GPU types in the same proportions (``--plan-gpus`` a multiple of 64, in
eight-GPU servers), jobs drawn like paper-512's at ``--plan-rate`` jobs/h (by
default paper-512's load per GPU). It reports, per policy, the seconds spent
inside the policy's ``plan`` and ``plan_fragment`` calls (the simulator's own
work left out), the ratio hops / sia, and a digest of every plan the policy
made: with a baseline, equal digests show that the faster hops decided exactly
as the old one did. ``--planning-only`` runs this case alone.

Every measurement runs in a fresh process (imports and memo tables are not shared)
and reports its CPU time beside its wall time: on a shared machine the wall time
carries other processes' load, the CPU time much less of it.
With ``--baseline-ref REF`` (default ``main``; ``--baseline-ref ''`` to skip) the same
measurement is also made on hops at git ref REF, unpacked into a temporary
directory; the two versions are timed alternately, policy by policy, so that the
load of a shared machine falls on both, and the ratio old / new is printed. FIFO's
time is almost all simulator, so each policy's ratio to FIFO shows what its
planning adds.

The 48-GPU cluster holds two eight-GPU servers of each paper-512 GPU type
(GTX1080Ti, TitanXP, RTX3090); its 300 jobs are drawn like paper-512's (at most
8 GPUs each) at 9 jobs/h, the paper-512 load scaled to 48 GPUs.

    .venv/bin/python benchmarks/simulate_speed.py [--policies hops,sia,gavel,fifo] [--seed 0]
        [--baseline-ref main] [--big-policy fifo] [--big-jobs 10000] [--big-rate 40]
        [--workers 2] [--plan-gpus 256] [--plan-jobs 640] [--plan-rate 50]
        [--plan-policies hops,sia] [--planning-only] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GOAL_S = 60.0
GAVEL48_GOAL_S = 6.0
PLANNING_GOAL_RATIO = 3.0
REPO = Path(__file__).resolve().parent.parent

CLUSTER_48 = {
    "gpu_types": {
        "GTX1080Ti": {"b_link": 2.5e9, "b_net": 3.1e8, "speed": 1.0},
        "TitanXP": {"b_link": 2.5e9, "b_net": 3.1e8, "speed": 1.1},
        "RTX3090": {"b_link": 4.0e9, "b_net": 7.8e8, "speed": 2.5},
    },
    "node_groups": [
        {"prefix": "gtx-", "count": 2, "gpu_type": "GTX1080Ti", "gpus": 8},
        {"prefix": "titan-", "count": 2, "gpu_type": "TitanXP", "gpus": 8},
        {"prefix": "rtx-", "count": 2, "gpu_type": "RTX3090", "gpus": 8},
    ],
}


def scaled_paper_cluster(gpus: int) -> dict[str, Any]:
    """paper-512's cluster shrunk or grown to ``gpus`` GPUs (a multiple of 64): every
    server group keeps its share, so the types stay in paper-512's proportions."""
    import tomllib

    from hopsd.sim.run import preset_path

    if gpus <= 0 or gpus % 64:
        raise SystemExit(f"--plan-gpus must be a positive multiple of 64, got {gpus}")
    with preset_path("paper-512.toml").open("rb") as f:
        cluster: dict[str, Any] = tomllib.load(f)
    for group in cluster["node_groups"]:
        group["count"] = group["count"] * gpus // 512
    return cluster


def _inputs(kind: str, seed: int, jobs: int, rate: float, gpus: int = 0) -> tuple[Any, list[Any]]:
    """Ground truth and jobs of one workload, with whichever hops is on the import path."""
    from dataclasses import replace

    from hopsd.sim.cluster_file import parse_cluster
    from hopsd.sim.run import build_truth, load_inputs
    from hopsd.sim.workload import PRESETS, generate

    if kind == "planning":
        truth = build_truth(parse_cluster(scaled_paper_cluster(gpus), f"{gpus}-gpu", seed=seed))
        spec = replace(PRESETS["paper-512"], n_jobs=jobs, jobs_per_hour=rate)
        return truth, generate(spec, truth, seed)
    if kind == "paper512":
        return load_inputs("paper-512", None, None, None, seed)
    if kind == "big":
        truth, _ = load_inputs("paper-512", None, None, None, seed)
        spec = replace(PRESETS["paper-512"], n_jobs=jobs, jobs_per_hour=rate)
        return truth, generate(spec, truth, seed)
    truth = build_truth(parse_cluster(CLUSTER_48, "48-gpu", seed=seed))
    spec = replace(PRESETS["paper-512"], n_jobs=300, jobs_per_hour=9.0, max_gpus=8)
    return truth, generate(spec, truth, seed)


def child(kind: str, policy: str, seed: int, jobs: int, rate: float) -> None:
    """Time one policy on one workload and print ``{"wall_s", "cpu_s", "makespan_h"}``.

    Runs in a subprocess whose ``PYTHONPATH`` names the hops to measure.
    """
    _import_from_pythonpath()
    from hopsd.sim.engine_config import EngineConfig
    from hopsd.sim.run import run_policy

    truth, specs = _inputs(kind, seed, jobs, rate)
    figures = _timed_run(lambda: run_policy(truth, specs, policy, EngineConfig(seed=seed)))
    print(json.dumps(figures))


def _timed_run(run: Callable[[], Any]) -> dict[str, float]:
    """``{"wall_s", "cpu_s", "makespan_h"}`` of one simulation ``run()``.

    Its stdout goes to stderr meanwhile: solver prints from native code must not
    mix with the figures the parent reads.
    """
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        result = run()
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
    makespan_h = max(j.finish_time or 0.0 for j in result.jobs) / 3600
    return {"wall_s": wall, "cpu_s": cpu, "makespan_h": makespan_h}


class TimedPolicy:
    """A policy wrapped so that the time inside its planning calls is summed, and every
    plan it returns is folded into a digest (same digest, same decisions)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.calls = 0
        self.digest = hashlib.sha256()

    def _timed(self, method: Any, snapshot: Any, settings: Any) -> Any:
        started, cpu_started = time.perf_counter(), time.process_time()
        plan = method(snapshot, settings)
        self.seconds += time.perf_counter() - started
        self.cpu_seconds += time.process_time() - cpu_started
        self.calls += 1
        decided = (plan.start, plan.keep, plan.move, plan.preempt, plan.objective)
        self.digest.update(repr(decided).encode())
        return plan

    def plan(self, snapshot: Any, settings: Any) -> Any:
        return self._timed(self.inner.plan, snapshot, settings)

    def plan_fragment(self, snapshot: Any, settings: Any) -> Any:
        return self._timed(self.inner.plan_fragment, snapshot, settings)


def planning_child(policy: str, seed: int, jobs: int, rate: float, gpus: int) -> None:
    """Replay the planning case under one policy and print its planning seconds and digest."""
    _import_from_pythonpath()
    from hopsd.plugins import get_policy
    from hopsd.sim.engine import Engine
    from hopsd.sim.engine_config import EngineConfig

    truth, specs = _inputs("planning", seed, jobs, rate, gpus)
    timed = TimedPolicy(get_policy(policy, None))
    figures: dict[str, Any] = _timed_run(
        lambda: Engine(truth, specs, timed, EngineConfig(seed=seed)).run()
    )
    figures |= {"plan_s": timed.seconds, "plan_cpu_s": timed.cpu_seconds, "plan_calls": timed.calls}
    print(json.dumps({**figures, "plans_digest": timed.digest.hexdigest()}))


def _import_from_pythonpath() -> None:
    """Make ``import hopsd`` find the hops on ``PYTHONPATH``, not the installed one.

    An editable install puts a finder ahead of ``sys.path`` that maps ``hopsd``
    to the checkout it was installed from; left in place, the baseline would be
    that checkout too and every old/new ratio would compare hops with itself.
    """
    src = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if not src:
        return
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, src)
    import hopsd

    where = Path(hopsd.__file__).resolve()
    if not where.is_relative_to(Path(src).resolve()):
        raise SystemExit(f"hops imported from {where}, not from {src}")


def _measure(src: Path, kind: str, policy: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run :func:`child` for the hops found in ``src`` and return its figures."""
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, policy]
    cmd += ["--seed", str(args.seed), "--big-jobs", str(args.big_jobs)]
    cmd += ["--big-rate", str(args.big_rate), "--plan-gpus", str(args.plan_gpus)]
    cmd += ["--plan-jobs", str(args.plan_jobs), "--plan-rate", str(args.plan_rate)]
    done = subprocess.run(
        cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"measurement {kind}/{policy} in {src} failed:\n{done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _unpack(ref: str, into: Path) -> Path:
    """hops at git ref ``ref``, unpacked under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _pair(
    kind: str, policy: str, args: argparse.Namespace, old: Path | None
) -> dict[str, float | None]:
    """New (and, with a baseline, old) figures of one measurement, old first."""
    before = _measure(old, kind, policy, args) if old is not None else None
    after = _measure(REPO, kind, policy, args)
    return {
        "new_s": after["wall_s"],
        "old_s": before["wall_s"] if before else None,
        "old_over_new": before["wall_s"] / after["wall_s"] if before else None,
        "new_cpu_s": after["cpu_s"],
        "old_cpu_s": before["cpu_s"] if before else None,
        "old_over_new_cpu": before["cpu_s"] / after["cpu_s"] if before else None,
        "new_makespan_h": after["makespan_h"],
        "old_makespan_h": before["makespan_h"] if before else None,
    }


def _planning_pair(policy: str, args: argparse.Namespace, old: Path | None) -> dict[str, Any]:
    """Planning seconds of one policy on the planning case, new (and old, measured first)."""
    before = _measure(old, "planning", policy, args) if old is not None else None
    after = _measure(REPO, "planning", policy, args)
    out: dict[str, Any] = {
        "plan_s": after["plan_s"],
        "plan_cpu_s": after["plan_cpu_s"],
        "plan_calls": after["plan_calls"],
        "sim_wall_s": after["wall_s"],
        "sim_cpu_s": after["cpu_s"],
        "makespan_h": after["makespan_h"],
        "plans_digest": after["plans_digest"],
    }
    if before is not None:
        out["old_plan_s"] = before["plan_s"]
        out["old_plan_cpu_s"] = before["plan_cpu_s"]
        out["old_over_new"] = before["plan_s"] / max(after["plan_s"], 1e-9)
        out["old_over_new_cpu"] = before["plan_cpu_s"] / max(after["plan_cpu_s"], 1e-9)
        out["same_plans_as_old"] = before["plans_digest"] == after["plans_digest"]
    return out


def planning_case(args: argparse.Namespace, old: Path | None) -> dict[str, Any]:
    """Every ``--plan-policies`` policy on the planning case, and hops's time over Sia's."""
    names = [p for p in args.plan_policies.split(",") if p]
    per = {name: _planning_pair(name, args, old) for name in names}
    ratio = cpu_ratio = None
    if "hops" in per and "sia" in per:
        ratio = per["hops"]["plan_s"] / max(per["sia"]["plan_s"], 1e-9)
        cpu_ratio = per["hops"]["plan_cpu_s"] / max(per["sia"]["plan_cpu_s"], 1e-9)
    return {
        "gpus": args.plan_gpus,
        "jobs": args.plan_jobs,
        "rate_per_h": args.plan_rate,
        "policies": per,
        "hops_over_sia": ratio,
        "hops_over_sia_cpu": cpu_ratio,
        "goal_ratio": PLANNING_GOAL_RATIO,
    }


def _parallel_wall(names: list[str], args: argparse.Namespace) -> float:
    """The whole comparison as ``simulate(..., workers=N)`` runs it (what a user waits)."""
    code = (
        "import time, contextlib, sys\n"
        "from hopsd.sim.run import simulate\n"
        "t = time.perf_counter()\n"
        "with contextlib.redirect_stdout(sys.stderr):\n"
        f"    simulate('paper-512', policies={names!r}, seed={args.seed}, workers={args.workers})\n"
        "print(time.perf_counter() - t)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--policies", default="hops,sia,gavel,fifo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline-ref", default="main", help="git ref to compare with; '' skips")
    parser.add_argument("--big-policy", default="fifo")
    parser.add_argument("--big-jobs", type=int, default=10_000, help="0 skips the big trace")
    parser.add_argument("--big-rate", type=float, default=40.0, help="jobs per hour")
    parser.add_argument("--workers", type=int, default=2, help="1 skips the parallel timing")
    parser.add_argument("--plan-gpus", type=int, default=256, help="planning case: GPUs")
    parser.add_argument("--plan-jobs", type=int, default=640, help="0 skips the planning case")
    parser.add_argument(
        "--plan-rate", type=float, default=50.0, help="planning case: jobs per hour"
    )
    parser.add_argument("--plan-policies", default="hops,sia")
    parser.add_argument("--planning-only", action="store_true", help="run the planning case alone")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "POLICY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, policy = args.child
        if kind == "planning":
            planning_child(policy, args.seed, args.plan_jobs, args.plan_rate, args.plan_gpus)
        else:
            child(kind, policy, args.seed, args.big_jobs, args.big_rate)
        return
    if args.planning_only:
        _planning_main(args)
        return

    names = [p for p in args.policies.split(",") if p]
    if "fifo" not in names:
        names.append("fifo")
    with tempfile.TemporaryDirectory(prefix="hops-baseline-") as tmp:
        old = _unpack(args.baseline_ref, Path(tmp)) if args.baseline_ref else None
        paper = {name: _pair("paper512", name, args, old) for name in names}
        gavel48 = _pair("gavel48", "gavel", args, old)
        big = _pair("big", args.big_policy, args, old) if args.big_jobs > 0 else None
        planning = planning_case(args, old) if args.plan_jobs > 0 else None
    parallel = _parallel_wall(names, args) if args.workers > 1 else None
    total_new = sum(float(p["new_s"] or 0.0) for p in paper.values())
    total_cpu = sum(float(p["new_cpu_s"] or 0.0) for p in paper.values())
    total_old = sum(float(p["old_s"] or 0.0) for p in paper.values()) if old else None
    base = float(paper["fifo"]["new_s"] or 1.0)
    report = {
        "paper512": paper,
        "paper512_wall_s": {n: p["new_s"] for n, p in paper.items()},
        "paper512_ratio_to_fifo": {n: float(p["new_s"] or 0.0) / base for n, p in paper.items()},
        "paper512_total_s": total_new,
        "paper512_total_cpu_s": total_cpu,
        "paper512_total_old_s": total_old,
        "paper512_total_old_over_new": total_old / total_new if total_old else None,
        "paper512_goal_s": GOAL_S,
        "paper512_workers": args.workers,
        "paper512_parallel_wall_s": parallel,
        "gavel48": {**gavel48, "jobs": 300, "gpus": 48, "goal_s": GAVEL48_GOAL_S},
        "big_trace": None
        if big is None
        else {**big, "jobs": args.big_jobs, "policy": args.big_policy, "rate_per_h": args.big_rate},
        "planning": planning,
        "baseline_ref": args.baseline_ref or None,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    _print(report, names, args)
    if planning is not None:
        _print_planning(planning)


def _planning_main(args: argparse.Namespace) -> None:
    """``--planning-only``: the planning case alone, against the baseline when there is one."""
    with tempfile.TemporaryDirectory(prefix="hops-baseline-") as tmp:
        old = _unpack(args.baseline_ref, Path(tmp)) if args.baseline_ref else None
        planning = planning_case(args, old)
    report = {"planning": planning, "seed": args.seed, "baseline_ref": args.baseline_ref or None}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    _print_planning(planning)


def _print_planning(p: dict[str, Any]) -> None:
    rate = p["rate_per_h"]
    print(
        f"planning case ({p['jobs']} jobs, {p['gpus']} GPUs, {rate:g} jobs/h): time in plan calls"
    )
    for name, q in p["policies"].items():
        line = f"  {name:<8}{q['plan_s']:8.1f} s (cpu {q['plan_cpu_s']:.1f} s)"
        line += f" in {q['plan_calls']} calls"
        line += f" (simulation {q['sim_wall_s']:.1f} s, makespan {q['makespan_h']:.2f} h)"
        if "old_plan_s" in q:
            same = "same plans" if q["same_plans_as_old"] else "PLANS DIFFER"
            line += f"; old {q['old_plan_s']:.1f} s (cpu {q['old_plan_cpu_s']:.1f} s),"
            line += f" old/new x{q['old_over_new']:.2f} (cpu x{q['old_over_new_cpu']:.2f}), {same}"
        print(line)
    if p["hops_over_sia"] is not None:
        ratio = p["hops_over_sia"]
        verdict = "meets" if ratio <= p["goal_ratio"] else "misses"
        cpu = p["hops_over_sia_cpu"]
        print(
            f"  hops / sia: x{ratio:.2f}, cpu x{cpu:.2f} ({verdict} the x{p['goal_ratio']:g} goal)"
        )


def _fmt_pair(p: dict[str, Any]) -> str:
    text = f"{p['new_s']:8.1f} s (cpu {p['new_cpu_s']:6.1f} s)"
    if p["old_s"] is not None:
        text += f"   (old {p['old_s']:6.1f} s, cpu {p['old_cpu_s']:6.1f} s,"
        text += f" old/new x{p['old_over_new']:.2f}, cpu x{p['old_over_new_cpu']:.2f})"
    return text


def _print(report: dict[str, Any], names: list[str], args: argparse.Namespace) -> None:
    print(f"paper-512 (500 jobs, 512 GPUs), seed {args.seed}, baseline {args.baseline_ref!r}")
    for name in names:
        p = report["paper512"][name]
        ratio = report["paper512_ratio_to_fifo"][name]
        makespan = p["new_makespan_h"]
        print(f"  {name:<8}{_fmt_pair(p)}  x{ratio:5.1f} of fifo  makespan {makespan:.2f} h")
    total = report["paper512_total_s"]
    verdict = "meets" if total <= GOAL_S else "misses"
    cpu = report["paper512_total_cpu_s"]
    line = f"  total   {total:8.1f} s (cpu {cpu:.1f} s) one after the other"
    line += f" ({verdict} the {GOAL_S:.0f} s goal)"
    if report["paper512_total_old_s"]:
        line += f"; old {report['paper512_total_old_s']:.1f} s"
    print(line)
    if report["paper512_parallel_wall_s"] is not None:
        print(
            f"  simulate(workers={args.workers}): {report['paper512_parallel_wall_s']:.1f} s wall"
        )
    g = report["gavel48"]
    verdict = "meets" if g["new_s"] <= GAVEL48_GOAL_S else "misses"
    print(f"300-job 48-GPU trace, gavel:{_fmt_pair(g)} ({verdict} the {GAVEL48_GOAL_S:.0f} s goal)")
    if report["big_trace"] is not None:
        b = report["big_trace"]
        hours = b["new_makespan_h"]
        print(f"{b['jobs']}-job trace, {b['policy']}:{_fmt_pair(b)}, {hours:.1f} h simulated")


if __name__ == "__main__":
    main()
