"""What hops tells users, checked against what Slurm says at the same instants.

A live test calls :meth:`StatusOracle.poll` while its workload runs. Each poll
looks at squeue; every ``every_s`` it also runs ``hops status --all --json``
and ``hops show --json`` of one job in turn (the commands' own code, in
process) and judges each job hops shows against the squeue looks taken from
``lag_s`` before the command to just after it: hopsd follows Slurm one tick
behind, so a job may show what Slurm said up to a tick ago, never anything
Slurm did not say. At the end :meth:`check_runs` compares each job's runs in
``hops show`` with ``sacct -D``.

A contradiction is one sentence naming the job, what hops said and what Slurm
said; the test asserts there are none.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daemon_live import LiveEnv
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.slurm.port import RunRecord, SlurmJob

ON_GPUS = frozenset({"RUNNING", "COMPLETING", "CONFIGURING"})
WAITING_STATES = frozenset({"submitted", "queued", "preempted", "requeued"})
ENDED_STATES = frozenset({"done", "failed", "cancelled"})
#: How each way a run ended in ``hops show`` appears in ``sacct -D``.
SACCT_OF_ENDED = {
    "completed": {"COMPLETED"},
    "failed": {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL"},
    "cancelled": {"CANCELLED"},
    "timeout": {"TIMEOUT"},
    "moved": {"REQUEUED"},
    "preempted": {"REQUEUED", "PREEMPTED"},
    "profiling over": {"REQUEUED"},
    "launch failed": {"REQUEUED", "FAILED"},
    "requeued": {"REQUEUED"},
}
#: Words a reason of each kind of state must not start with.
NOT_WAITING = ("running on", "profiling on", "started on")
NOT_RUNNING = ("waiting", "queued", "held")


@dataclass(frozen=True)
class Look:
    """One squeue reading: when, and each job's state and GPUs per node."""

    at: float
    jobs: Mapping[int, tuple[str, Mapping[str, int]]]


def slurm_class(look: Look, job: int) -> tuple[str, Mapping[str, int]]:
    """``on`` (with its GPUs per node), ``waiting`` or ``ended`` (finished or gone)."""
    state, nodes = look.jobs.get(job, ("GONE", {}))
    if state in ON_GPUS:
        return "on", nodes
    if state == "PENDING":
        return "waiting", {}
    return "ended", {}


def hops_class(record: Mapping[str, Any]) -> str:
    state = str(record["state"])
    if state in ENDED_STATES:
        return "ended"
    if state in WAITING_STATES or (state == "profiling" and not record["nodes"]):
        return "waiting"
    return "on"


@dataclass
class StatusOracle:
    """Polls hops and squeue; collects contradictions between them."""

    env: LiveEnv
    jobs: Callable[[], Collection[int]]
    lag_s: float
    every_s: float = 2.0
    looks: list[Look] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)
    judged: int = 0
    shows: int = 0
    _last: float = 0.0
    _turn: int = 0
    _types: dict[str, str] = field(default_factory=dict)
    _runner: CliRunner = field(default_factory=CliRunner)

    def poll(self) -> None:
        self._look()
        if time.time() - self._last < self.every_s:
            return
        before = time.time()
        status = self._hops(["status", "--all", "--json"])
        shown = self._show_one()
        after = self._look()
        self._last = after
        window = [k for k in self.looks if before - self.lag_s <= k.at <= after]
        wanted = set(self.jobs())
        for record in status.get("jobs", []):
            if record["job_id"] in wanted:
                self._judge(record, window, "status")
        if shown is not None:
            self._judge(shown, window, "show")
            self._judge_open_run(shown)
        self.looks = [k for k in self.looks if k.at >= after - 4 * self.lag_s]

    # -- readings --------------------------------------------------------------------

    def _look(self) -> float:
        jobs: list[SlurmJob] = self.env.port.list_jobs()
        at = time.time()
        self.looks.append(Look(at, {j.job_id: (j.state, dict(j.gpus_by_node)) for j in jobs}))
        return at

    def _hops(self, args: Sequence[str]) -> dict[str, Any]:
        env = {"HOPS_CONF": str(self.env.config_path)}
        result = self._runner.invoke(app, list(args), env=env)
        assert result.exit_code == 0, (args, result.output)
        payload: dict[str, Any] = json.loads(result.stdout)
        return payload

    def _show_one(self) -> dict[str, Any] | None:
        ids = sorted(self.jobs())
        if not ids:
            return None
        job = ids[self._turn % len(ids)]
        self._turn += 1
        result = self._runner.invoke(
            app, ["show", str(job), "--json"], env={"HOPS_CONF": str(self.env.config_path)}
        )
        if result.exit_code != 0:  # not adopted yet
            return None
        self.shows += 1
        payload: dict[str, Any] = json.loads(result.stdout)
        return payload

    def type_of(self, node: str) -> str | None:
        if not self._types:
            self._types = {n.name: str(n.gpu_type) for n in self.env.port.list_nodes()}
        return self._types.get(node)

    # -- judging ---------------------------------------------------------------------

    def _say(self, source: str, record: Mapping[str, Any], what: str) -> None:
        clock = time.strftime("%H:%M:%S", time.gmtime())
        self.contradictions.append(
            f"{clock} {source} job {record['job_id']} ({record['state']}, {record['nodes']}, "
            f"{record['gpu_type']}, {record['reason']!r}): {what}"
        )

    def _judge(self, record: Mapping[str, Any], window: Sequence[Look], source: str) -> None:
        self.judged += 1
        job = int(record["job_id"])
        mine = hops_class(record)
        nodes = {str(n): int(g) for n, g in record["nodes"].items()}
        said = [slurm_class(k, job) for k in window]
        if mine == "on":
            if (mine, nodes) not in said:
                self._say(source, record, f"Slurm said {said} meanwhile")
            types = {self.type_of(n) for n in nodes}
            if types != {record["gpu_type"]}:
                self._say(source, record, f"its nodes are of types {types}")
        elif mine not in {c for c, _ in said}:
            self._say(source, record, f"Slurm said {said} meanwhile")
        if mine != "on" and (nodes or record["gpu_type"] is not None):
            self._say(source, record, "shows GPUs while holding none")
        self._judge_reason(record, mine, source)
        if float(record["samples_done"]) > float(record["total_samples"]) + 1e-6:
            self._say(source, record, "more samples done than the job has")

    def _judge_reason(self, record: Mapping[str, Any], mine: str, source: str) -> None:
        reason = str(record["reason"] or "")
        if not reason:
            self._say(source, record, "no reason")
        elif mine == "waiting" and reason.startswith(NOT_WAITING):
            self._say(source, record, "a waiting job's reason says it runs")
        elif mine == "on" and reason.startswith(NOT_RUNNING):
            self._say(source, record, "a running job's reason says it waits")
        elif mine == "on" and reason.startswith("profiling on ") and record["nodes"]:
            if not reason.startswith(f"profiling on {record['gpu_type']} "):
                self._say(source, record, "a profiling job's reason names another type")
        elif mine == "on" and reason.startswith("moved to ") and record["nodes"]:
            where = f"{record['gpu_type']} " + "+".join(
                f"{n}:{g}" for n, g in record["nodes"].items()
            )
            if reason != f"moved to {where}":
                self._say(source, record, "a job still on its GPUs says it moved elsewhere")
        elif mine == "ended" and reason.startswith(NOT_WAITING + NOT_RUNNING):
            self._say(source, record, "an ended job's reason is of another state")

    def _judge_open_run(self, shown: Mapping[str, Any]) -> None:
        """While a job holds GPUs its last run is open and names where it runs."""
        runs = shown.get("runs", [])
        if hops_class(shown) != "on":
            if runs and runs[-1]["end_time"] is None and shown["state"] in ENDED_STATES:
                self._say("show", shown, f"ended with a run still open: {runs[-1]}")
            return
        if not runs or runs[-1]["end_time"] is not None:
            self._say("show", shown, f"holds GPUs without an open run: {runs[-1:]}")
        elif runs[-1]["nodes"] and runs[-1]["nodes"] != shown["nodes"]:
            self._say("show", shown, f"its open run names other nodes: {runs[-1]}")

    # -- at the end: each run against sacct -D ----------------------------------------------

    def check_runs(self, jobs: Collection[int], total_of: Mapping[int, float]) -> int:
        """Each job's runs in ``hops show`` against ``sacct -D``; the runs compared."""
        compared = 0
        records = self.env.port.runs(sorted(jobs))
        by_job: dict[int, list[RunRecord]] = {}
        for r in records:
            by_job.setdefault(r.job_id, []).append(r)
        for job in sorted(jobs):
            shown = self._hops(["show", str(job), "--json"])
            compared += self._runs_agree(shown, by_job.get(job, []))
            total = total_of.get(job)
            if shown["state"] == "done" and total is not None and shown["samples_done"] != total:
                self._say("show", shown, f"done with {shown['samples_done']} of {total} samples")
        return compared

    def _runs_agree(self, shown: Mapping[str, Any], slurm: Sequence[RunRecord]) -> int:
        ran = [r for r in slurm if r.start_time is not None]
        mine = shown.get("runs", [])
        if len(mine) != len(ran):
            starts = [(r.state, r.start_time, r.end_time) for r in ran]
            self._say("show", shown, f"runs {mine} but sacct -D lists {starts}")
            return 0
        for run, record in zip(mine, ran, strict=True):
            assert record.start_time is not None
            if abs(float(run["start_time"]) - record.start_time) > self.lag_s:
                self._say("show", shown, f"run {run} started at {record.start_time} in sacct")
            end = record.end_time
            if end is None or run["end_time"] is None or abs(run["end_time"] - end) > self.lag_s:
                self._say("show", shown, f"run {run} ended at {end} in sacct")
            if record.state not in SACCT_OF_ENDED.get(str(run["ended"]), set()):
                self._say("show", shown, f"run {run} ended {record.state} in sacct")
        return len(mine)
