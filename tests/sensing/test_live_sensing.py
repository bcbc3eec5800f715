"""Live: profiling runs, learned estimates and per-server speed on the Slurm test cluster.

A job whose speed follows the server (like a data-loading-bound job) is
profiled on every GPU type, runs on the slow v100 server while the fast one is
busy, and hops moves it to the fast one once it frees: what hops learned about
the two servers of the same type decides the move, and ``hops nodes`` shows it.
Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from pathlib import Path

import pytest
from daemon_live import LIVE, PYTHON, TRAIN_JOB, LiveEnv, drive
from sqlalchemy import select

from hops_cli.nodes import speed_factors
from hopsd.config import parse_config
from hopsd.daemon.tick import Tick
from hopsd.ledger.allocations import allocation_history
from hopsd.ledger.models import AllocationReason, ProfileRow, ThroughputLayer, ThroughputRow
from hopsd.ledger.unit import Unit
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = LIVE

PROFILING = "[scheduler]\nprofiling = true\nprofiling_iterations = 5\nprofiling_timeout_s = 20.0\n"
NODE_TYPES = {
    "k80n1": "k80",
    "v100n1": "v100",
    "v100n2": "v100",
    "a100n1": "a100",
    "a100n2": "a100",
}


ROUND_S = 30.0


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    # hopsd prices the move at the restart it measured whole (the profiling runs' restarts,
    # several seconds here): a round must be long enough for a 2x faster server to pay it
    live = LiveEnv.create(tmp_path, round_s=ROUND_S)
    text = live.config_path.read_text().replace("[scheduler]\n", PROFILING, 1)
    live.config_path.write_text(text)
    live = dataclasses.replace(live, config=parse_config(text, str(live.config_path)))
    yield live
    live.cleanup()


def block(env: LiveEnv, node: str) -> int:
    out = subprocess.run(
        ["sbatch", "--parsable", "-J", f"{env.prefix}block", "-p", "all", "-w", node,
         "--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 300"],
        capture_output=True, text=True, check=True, timeout=20,
    )  # fmt: skip
    job = int(out.stdout.strip().split(";")[0])
    env.blockers.append(job)
    assert drive(lambda: None, lambda: running(env, job), 20, 0.3), f"blocker on {node} not running"
    return job


def running(env: LiveEnv, job: int) -> bool:
    return any(j.job_id == job and j.running for j in env.port.list_jobs())


def submit(env: LiveEnv) -> int:
    script = env.root / "sensed.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"export HOPS_SPOOL_DIR={env.spool}\nexport HOPS_PROBE_FLUSH_S=1\n"
        f"exec {PYTHON} {TRAIN_JOB} --samples 1e6 --batch 32 --base 100 "
        "--type-speed 'k80=1,v100=8,a100=1'\n"
    )
    args = ["-J", f"{env.prefix}sensed", "-o", str(env.root / "%j.out"), "--open-mode=append"]
    job = env.port.submit(
        SubmitRequest(str(script), sbatch_args=[*args, "-t", "10"], tag=HopsTag((1,), 1e6))
    )
    env.submitted.append(job)
    return job


def profiled_types(env: LiveEnv, job: int) -> set[str]:
    with env.sessions.begin() as s:
        rows = s.scalars(select(ProfileRow).where(ProfileRow.job_id == str(job)))
        return {r.gpu_type for r in rows if r.iterations > 0}


def entity(env: LiveEnv, job: int) -> dict[str, float]:
    with env.sessions.begin() as s:
        rows = s.scalars(
            select(ThroughputRow).where(
                ThroughputRow.job_id == str(job),
                ThroughputRow.layer == ThroughputLayer.ENTITY_AGGREGATED,
                ThroughputRow.size == 1,
            )
        )
        return {r.place: r.per_gpu for r in rows}


def placements(env: LiveEnv, job: int) -> list[tuple[str, str]]:
    with env.sessions.begin() as s:
        return [
            (a.reason.value, str(a.parts[0][0]))
            for a in allocation_history(s, str(job))
            if a.reason in (AllocationReason.START, AllocationReason.MOVE) and a.parts
        ]


def test_profiles_estimates_and_server_speed_are_learned_and_used(env: LiveEnv) -> None:
    started = time.monotonic()
    slow_side = block(env, "v100n2")  # the v100 profile is taken on v100n1
    job = submit(env)
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    types = {"k80", "v100", "a100"}
    assert drive(tick.run_once, lambda: profiled_types(env, job) == types, 45), (
        profiled_types(env, job),
        env.rows().get(job),
    )
    assert all(node in ("k80n1", "v100n1", "a100n1", "a100n2") for _, node in placements(env, job))

    # swap the busy v100 server: the job's first real run lands on the slow one
    block(env, "v100n1")
    subprocess.run(["scancel", str(slow_side)], check=True, timeout=20)
    assert drive(lambda: None, lambda: not running(env, slow_side), 20, 0.3)
    assert drive(tick.run_once, lambda: "v100n2" in entity(env, job), 30), placements(env, job)
    assert placements(env, job)[-1] == ("start", "v100n2")
    assert env.rows()[job].estimate_source in ("entity", "type")

    # the fast server frees: hops moves the job there, on what it learned
    subprocess.run(["scancel", str(env.blockers[-1])], check=True, timeout=20)
    moved = ("move", "v100n1")
    assert drive(tick.run_once, lambda: placements(env, job)[-1] == moved, ROUND_S + 30), (
        placements(env, job)
    )
    learned = entity(env, job)
    assert 1.6 < learned["v100n1"] / learned["v100n2"] < 2.5, learned
    with env.sessions.begin() as s:
        factors = speed_factors(Unit(s), NODE_TYPES)
    assert factors["v100n1"][0] == pytest.approx(1.0, abs=0.1), factors
    assert factors["v100n2"][0] == pytest.approx(0.5, abs=0.1), factors
    assert time.monotonic() - started < 90


def test_a_job_that_never_uses_the_probe_is_started_at_most_twice(env: LiveEnv) -> None:
    """Profiling on, a plain ``sleep`` job: its one profiling run gives no report, so its
    profiling ends (no other type is tried) and its next start is its real run."""
    script = env.root / "sleeper.sh"
    script.write_text("#!/bin/bash\nsleep 30\n")
    args = ["-J", f"{env.prefix}sleeper", "-o", "/dev/null", "-t", "5"]
    job = env.port.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 1e6)))
    env.submitted.append(job)
    tick = Tick(env.config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    assert drive(tick.run_once, env.all_terminal, 120), env.rows().get(job)
    row = env.rows()[job]
    assert row.state.value == "done", (row.state, row.state_reason)
    starts = [reason for reason, _ in placements(env, job) if reason == "start"]
    assert len(starts) == 2, placements(env, job)  # one profiling run, one real run
    assert row.restarts <= 1, row.restarts
    assert not profiled_types(env, job)
