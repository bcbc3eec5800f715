"""Helpers of the live tests of a centre's Slurm: jobs hops does not manage, drains, reservations.

Every change made to a node or a reservation is undone by the test that made it
(``with drained(...)``, ``with reserved(...)``), so a failing test leaves the
test cluster as it found it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from daemon_live import LiveEnv
from sqlalchemy import select

from hopsd.core.capacity import held_gpus
from hopsd.daemon.decide import Decision
from hopsd.ledger.models import AllocationReason, AllocationRow, IntentRow, IntentState, JobState


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], check=True, capture_output=True, timeout=20)


def foreign(env: LiveEnv, *args: str, seconds: int = 300, user: str | None = None) -> int:
    """A plain ``sbatch`` job (no hops tag) holding GPUs until it ends or the test cancels it."""
    prefix = ["runuser", "-u", user, "--"] if user else []
    out = subprocess.run(
        [
            *prefix,
            "sbatch",
            "--parsable",
            "-J",
            f"{env.prefix}foreign",
            "-o",
            "/dev/null",
            "-t",
            "5",
            *args,
            "--wrap",
            f"sleep {seconds}",
        ],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
        cwd="/tmp",
    )
    job = int(out.stdout.strip().split(";")[0])
    env.blockers.append(job)
    return job


def restarts_planned(env: LiveEnv, job_id: str) -> int:
    """How many moves and preemptions hops planned for the job."""
    with env.sessions.begin() as s:
        rows = s.scalars(select(AllocationRow).where(AllocationRow.job_id == job_id)).all()
        return sum(r.reason in (AllocationReason.MOVE, AllocationReason.PREEMPT) for r in rows)


def check_exactly_once(env: LiveEnv) -> None:
    """Every job of the test done and finished once, no restart hops did not plan, no
    intent left pending."""
    rows = env.rows()
    slurm = {j.job_id: j for j in env.port.list_jobs()}
    for job in env.submitted:
        row = rows[job]
        assert row.state == JobState.DONE, (job, row.state, row.state_reason)
        events = env.events(job)
        assert [e["event"] for e in events].count("done") == 1, events
        starts = sum(e["event"] == "start" for e in events)
        # a run requeued within milliseconds of its start may not have written its event
        assert 1 <= starts <= 1 + row.restarts, (job, events, row.restarts)
        assert row.restarts <= restarts_planned(env, row.id), "a restart nobody planned"
        if job in slurm:
            assert slurm[job].restarts == row.restarts
    with env.sessions.begin() as s:
        states = [i.state for i in s.scalars(select(IntentRow))]
    assert IntentState.PENDING not in states


def tick_while_away(tick: Callable[[], object], seconds: float) -> None:
    """Tick once a second for ``seconds`` while slurmctld is away (the ticks fail)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tick()
        time.sleep(1.0)


def slurm_states(env: LiveEnv) -> dict[int, tuple[str, bool, dict[str, int]]]:
    """Per job: Slurm's state, whether it is held, and its GPUs per node."""
    return {j.job_id: (j.state, j.held, j.placement) for j in env.port.list_jobs()}


def wait_running(env: LiveEnv, jobs: list[int], deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        states = slurm_states(env)
        if all(states.get(j, ("",))[0] == "RUNNING" for j in jobs):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {jobs} not running: {slurm_states(env)}")


@contextmanager
def drained(node: str) -> Iterator[None]:
    """``node`` drained (its jobs run on) until the block ends, then resumed."""
    scontrol("update", f"nodename={node}", "state=drain", "reason=hops-live-test")
    try:
        yield
    finally:
        resume(node)


def resume(node: str) -> None:
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=resume"],
        capture_output=True,
        timeout=20,
        check=False,  # already resumed: Slurm says so, and that is fine
    )


@contextmanager
def reserved(name: str, nodes: str, start_in_s: int, minutes: int = 30) -> Iterator[None]:
    """A maintenance reservation (root only) on ``nodes`` from ``start_in_s`` from now."""
    scontrol(
        "create",
        "reservation",
        f"reservationname={name}",
        f"starttime=now+{start_in_s}",
        f"duration={minutes}",
        f"nodes={nodes}",
        "flags=maint,ignore_jobs",
        "users=root",
    )
    try:
        yield
    finally:
        subprocess.run(
            ["scontrol", "delete", f"reservation={name}"],
            capture_output=True,
            timeout=20,
            check=False,
        )


def accounting_kept() -> str:
    """Why Slurm keeps no accounting database here ("" when it does: sacctmgr works)."""
    listed = subprocess.run(
        ["sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if listed.returncode != 0 or not listed.stdout.strip():
        return f"no accounting database (HOPS_ACCOUNTING=0?): {listed.stderr.strip()}"
    return ""


@contextmanager
def preempting_qos(name: str) -> Iterator[str]:
    """A QOS whose jobs preempt those of QOS ``normal`` (Slurm requeues them: the test
    cluster runs ``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE``), deleted at the
    end even on failure; needs root and accounting."""

    def sacctmgr(*args: str) -> str:
        return subprocess.run(
            ["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=30, check=False
        ).stdout

    sacctmgr("add", "qos", name, "Preempt=normal")
    try:
        shown = sacctmgr("-n", "-P", "show", "qos", name, "format=Name,Preempt")
        assert shown.strip() == f"{name}|normal", shown
        yield name
    finally:
        # refused while a job of it is still active: the test's cancelled jobs end first
        end = time.monotonic() + 30
        while name in sacctmgr("-n", "-P", "show", "qos", name, "format=Name").split():
            sacctmgr("delete", "qos", name)
            if time.monotonic() > end:
                raise AssertionError(f"QOS {name} could not be deleted")
            time.sleep(1.0)


def preemptor(env: LiveEnv, qos: str, node: str, gpus: int, seconds: int) -> int:
    """Root's plain job of the preempting ``qos`` on ``gpus`` GPUs of ``node`` (tried
    until slurmctld has the new QOS from slurmdbd)."""
    partition = node.rstrip("0123456789").removesuffix("n")
    args = ("-p", partition, "-w", node, f"--gres=gpu:{gpus}", f"--qos={qos}")
    end = time.monotonic() + 20
    while True:
        try:
            return foreign(env, *args, seconds=seconds)
        except subprocess.CalledProcessError:
            if time.monotonic() > end:
                raise
            time.sleep(1.0)


def running_on(env: LiveEnv, job: int) -> dict[str, int]:
    """GPUs per node of ``job`` if Slurm runs it now (empty otherwise)."""
    state, _, placement = slurm_states(env).get(job, ("", False, {}))
    return placement if state == "RUNNING" else {}


def started_on(env: LiveEnv, job: int) -> list[list[str]]:
    """The nodes of each run of ``job``, from its own start reports."""
    return [list(e["nodes"]) for e in env.events(job) if e["event"] == "start"]  # type: ignore[call-overload]


def done_count(env: LiveEnv, job: int) -> int:
    return [e["event"] for e in env.events(job)].count("done")


def finished_once(env: LiveEnv, job: int) -> bool:
    return done_count(env, job) == 1


def others_running(env: LiveEnv, hops: Collection[int]) -> dict[int, dict[str, int]]:
    """GPUs per node of every running job that is not one of the given hops jobs."""
    jobs = env.port.list_jobs()
    return {j.job_id: j.placement for j in jobs if j.running and j.job_id not in hops}


def held_throughout(
    before: dict[int, dict[str, int]], after: dict[int, dict[str, int]]
) -> dict[str, int]:
    """GPUs per node of other jobs that ran from before a tick to after it."""
    out: dict[str, int] = {}
    for job, placement in before.items():
        if job in after:
            for node, gpus in placement.items():
                out[node] = out.get(node, 0) + gpus
    return out


def planned_gpus(decision: Decision) -> dict[str, int]:
    """GPUs per node of hops jobs once the decision is enacted (running ones it left alone too)."""
    plan = decision.plan
    placements = plan.placements()
    assert decision.planned is not None
    for job in decision.planned.running:
        if job.id not in placements and job.id not in plan.preempt and job.current is not None:
            placements[job.id] = job.current
    return held_gpus(placements.values())


def overbooked(
    sizes: dict[str, int], decision: Decision, steady: dict[str, int]
) -> dict[str, tuple[int, int]]:
    """Nodes where hops's plan and other jobs' GPUs held throughout the tick exceed the node."""
    planned = planned_gpus(decision)
    return {
        n: (planned.get(n, 0), steady.get(n, 0))
        for n in sizes
        if planned.get(n, 0) + steady.get(n, 0) > sizes[n]
    }


def names_any(argv: Sequence[str], jobs: Collection[int]) -> bool:
    """Whether a command names one of ``jobs`` (``123`` or ``JobId=123``). A submission
    names none: its words (``-t 10``, a time limit) are no job's id."""
    if argv and Path(argv[0]).name == "sbatch":
        return False
    ids = {str(j) for j in jobs}
    return any(word in ids or word.rpartition("=")[2] in ids for word in argv)


def cluster_dir() -> Path:
    return Path(os.environ.get("HOPS_CLUSTER_DIR", "/var/tmp/hops-cluster"))


def _pids_where(match: Callable[[str, bytes], bool]) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if match(cmdline, environ):
            out.append(int(entry.name))
    return out


def power_off(node: str, job: int) -> None:
    """``node`` fails as a machine does: its slurmd and the job's processes there die at once.

    On the test cluster every node is a ``slurmd -N NODE`` on this host; the
    job's ``slurmstepd`` and its script are killed first, so nothing of the
    job reports to slurmctld, then the node's slurmd (its pid from the cluster's
    ``pids`` file). slurmctld marks the node down after ``SlurmdTimeout``.
    """
    tag = f"[{job}.".encode()
    job_env = f"SLURM_JOB_ID={job}\0".encode()
    steps = _pids_where(lambda cmd, env: "slurmstepd" in cmd and tag.decode() in cmd)
    procs = _pids_where(lambda cmd, env: env.startswith(job_env) or b"\0" + job_env in env)
    for pid in steps + procs + [slurmd_pid(node)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def slurmd_pid(node: str) -> int:
    for line in (cluster_dir() / "pids").read_text().splitlines():
        name, _, pid = line.partition(" ")
        if name == f"slurmd-{node}":
            return int(pid)
    raise LookupError(f"no slurmd of {node} in the cluster's pids file")


def slurmd_alive(node: str) -> bool:
    """Whether the node's slurmd (its pid in the cluster's ``pids`` file) still runs."""
    try:
        cmdline = Path(f"/proc/{slurmd_pid(node)}/cmdline").read_bytes()
    except (OSError, LookupError):
        return False
    return b"slurmd" in cmdline and node.encode() in cmdline


def power_on(node: str) -> None:
    """Start ``node``'s slurmd again, recorded in the cluster's ``pids`` file as ``up`` does."""
    log = open(cluster_dir() / "log" / f"slurmd-{node}.out", "ab")  # noqa: SIM115 - the child's
    child = subprocess.Popen(
        ["slurmd", "-D", "-f", os.environ["SLURM_CONF"], "-N", node],
        stdin=subprocess.DEVNULL,  # as the cluster's own daemons: nothing of the caller's
        stdout=log,
        stderr=log,
        start_new_session=True,
        cwd=cluster_dir(),  # nor its directory pinned
    )
    pids = cluster_dir() / "pids"
    lines = [ln for ln in pids.read_text().splitlines() if not ln.startswith(f"slurmd-{node} ")]
    pids.write_text("\n".join([*lines, f"slurmd-{node} {child.pid}"]) + "\n")
