"""Run a workload under hopsd on the live test cluster, then replay its ledger (one decision path).

Shared by the live test and ``benchmarks/live_vs_replay.py``: jobs arrive at
their offsets while an in-process hopsd ticks every ``queue_refresh_s``; once
all are done, ``hops replay``'s own reading and replay of the ledger run with
the policy hopsd used, and each job's replayed JCT is set beside its live one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from daemon_live import LiveEnv

from hops_cli.replay import replay_payload, slurm_inventory
from hops_cli.simulate import stdout_to_stderr
from hopsd.daemon.tick import Tick
from hopsd.solver_banner import silence_solver_banner

T = TypeVar("T")


def cluster_up() -> bool:
    """Whether the live test cluster is there; says how to start it when not."""
    if os.environ.get("SLURM_CONF"):
        return True
    print("hops: SLURM_CONF unset: start the test cluster (docker/cluster.sh up)", file=sys.stderr)
    return False


def live_arguments(
    parser: argparse.ArgumentParser,
    keep_help: str = "keep the ledger, config and logs in this directory",
) -> argparse.Namespace | None:
    """A live benchmark's arguments with the ``--keep`` and ``--json`` every one takes;
    None (having said how to start it) when the test cluster is not up."""
    parser.add_argument("--keep", help=keep_help)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    return args if cluster_up() else None


def scaled(workload: Sequence[Arrival], scale: float) -> list[Arrival]:
    """Every job's samples and arrival time multiplied by ``scale``."""
    return [Arrival(a.at_s * scale, a.demands, a.samples * scale, a.type_speed) for a in workload]


@contextmanager
def benchmark_env(keep: str | None, prefix: str, round_s: float = 8.0) -> Iterator[LiveEnv]:
    """A live environment in ``keep`` (kept) or a temporary directory, cleaned up after;
    solver output never mixes with the figures a benchmark prints. ``round_s``: hopsd's
    round length (the live tests' short one unless a benchmark's jobs call for longer)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        env = LiveEnv.create(root, round_s=round_s)
        silence_solver_banner()
        try:
            yield env
        finally:
            env.cleanup()


def quietly(step: Callable[[], T]) -> T:
    """``step()`` with its stdout sent to stderr."""
    with stdout_to_stderr():
        return step()


@dataclass(frozen=True)
class Arrival:
    """One job of a live workload: when it is submitted (s after the start) and what it is."""

    at_s: float
    demands: tuple[int, ...]
    samples: float
    type_speed: str = ""


def run_live(env: LiveEnv, workload: Sequence[Arrival], deadline_s: float) -> tuple[float, float]:
    """Submit ``workload`` on its schedule and tick hopsd until every job ended.

    Returns the window (start, end) in epoch seconds that holds the jobs' submissions.
    """
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    pending = sorted(workload, key=lambda a: a.at_s)
    start = time.time()
    end = time.monotonic() + deadline_s
    index = 0
    interval = env.config.queue_refresh_s
    while time.monotonic() < end:
        began = time.monotonic()
        while index < len(pending) and time.time() - start >= pending[index].at_s:
            a = pending[index]
            env.submit(a.demands, a.samples, type_speed=a.type_speed, label=f"r{index}")
            index += 1
        tick.run_once()
        if index == len(pending) and env.all_terminal():
            return start - 5.0, time.time()
        time.sleep(max(0.0, interval - (time.monotonic() - began)))
    raise AssertionError(f"workload not finished within {deadline_s:.0f} s")


def replay_live(env: LiveEnv, window: tuple[float, float], policy: str) -> dict[str, Any]:
    """``hops replay --from --to --policies POLICY --json`` of the test's ledger."""
    return replay_payload(env.config, window[0], window[1], [policy], None, slurm_inventory)


def jct_errors(results: Mapping[str, Any], policy: str) -> dict[str, float]:
    """Replay vs live for one policy: avg JCT error and median per-job error (fractions)."""
    rows = results["jobs"]
    live = [float(r["live_jct_s"]) for r in rows]
    sim = [float(r[f"{policy}_jct_s"]) for r in rows]
    live_avg = float(np.mean(live))
    sim_avg = float(np.mean(sim))
    per_job = [abs(s - v) / v for s, v in zip(sim, live, strict=True) if v > 0]
    return {
        "jobs": float(len(rows)),
        "live_avg_jct_s": live_avg,
        "replay_avg_jct_s": sim_avg,
        "avg_jct_error": abs(sim_avg - live_avg) / live_avg if live_avg > 0 else 0.0,
        "median_job_error": float(np.median(per_job)) if per_job else 0.0,
    }


def compare(results: dict[str, Any], policy: str) -> dict[str, Any]:
    """The benchmark's figures plus the per-job rows (live and replayed JCT, seconds)."""
    figures: dict[str, Any] = dict(jct_errors(results, policy))
    figures["jobs"] = int(figures["jobs"])
    figures["restart_cost_s"] = results.get("restart_cost_s")  # measured, charged to moves
    figures["per_job"] = [
        {
            "job": r["job_id"],
            "demands": r["demands"],
            "live_jct_s": r["live_jct_s"],
            "replay_jct_s": r[f"{policy}_jct_s"],
        }
        for r in results["jobs"]
    ]
    return figures
