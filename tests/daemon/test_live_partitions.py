"""Live: several partitions managed at once, and one hops does not manage left alone.

hops manages the ``v100`` and ``a100`` partitions (``[slurm] partitions``) and
not ``k80``, whose node is in no managed partition. hops jobs submitted to the
site's default partition ``all`` run through both managed partitions, each on
its own GPU type, and finish once; none is planned onto the k80 node. Two
tagged hops jobs sent to ``k80`` were sent past hops: one waits held by its
owner, one its owner released and Slurm runs. hopsd never adopts either, never
makes the first one's hold its own, never requeues the second (it runs once,
to its end), and no command it runs names them; it says why (a refusal).
Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time

import pytest
from centre_live import finished_once, names_any, running_on, scontrol, slurm_states
from daemon_live import LIVE, LiveEnv

from hopsd.daemon.tick import Tick
from hopsd.ledger.models import JobState
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.tag import HopsTag

pytestmark = LIVE
MANAGED = ("v100", "a100")
TYPE_NODES = {"v100": {"v100n1", "v100n2"}, "a100": {"a100n1", "a100n2"}}


@pytest.fixture
def env(tmp_path):
    live = LiveEnv.create(tmp_path)
    yield live
    live.cleanup()


def tagged_in_k80(env: LiveEnv, label: str, seconds: int) -> int:
    """A hops-tagged job (held, as ``hops submit`` sends it) sent to partition ``k80``."""
    script = env.root / f"{label}.sh"
    script.write_text(f"#!/bin/bash\nsleep {seconds}\n")
    args = ["-J", f"{env.prefix}{label}", "-p", "k80", "-o", "/dev/null", "-t", "5"]
    job = env.port.submit(SubmitRequest(str(script), sbatch_args=args, tag=HopsTag((1,), 1e4)))
    env.blockers.append(job)
    return job


def test_managed_partitions_are_used_together_and_an_unmanaged_one_is_left_alone(env):
    config = dataclasses.replace(env.config, partitions=MANAGED)
    tick = Tick(config, env.port, env.sessions, adopt_filter=env.adopt_filter())
    held = tagged_in_k80(env, "k80held", 5)
    ran = tagged_in_k80(env, "k80ran", 20)
    scontrol("release", str(ran))  # its owner's release: Slurm runs it on k80n1
    hops = [env.submit((4,), 8000, label=f"m{i}") for i in range(4)]
    refused: dict[int, str] = {}
    partitions: dict[int, set[str]] = {j: set() for j in hops}
    seen_held: list[tuple[str, bool, str]] = []
    planned_nodes: set[str] = set()
    end = time.monotonic() + 90
    while time.monotonic() < end:
        result = tick.run_once()
        if result.reconcile is not None:
            refused.update(result.reconcile.rejected)
        if result.decision is not None:
            planned_nodes |= {
                n for c in result.decision.plan.placements().values() for n, _ in c.parts
            }
        jobs = {j.job_id: j for j in env.port.list_jobs()}
        for job in hops:
            if job in jobs and jobs[job].running:
                partitions[job].add(jobs[job].partition)
                assert set(running_on(env, job)) <= TYPE_NODES[jobs[job].partition]
        if held in jobs:
            seen_held.append((jobs[held].state, jobs[held].held, jobs[held].reason))
        if env.all_terminal() and jobs.get(ran) is not None and jobs[ran].finished:
            break
        time.sleep(0.5)
    rows = env.rows()
    assert env.all_terminal(), {j: rows[j].state for j in hops if j in rows}
    for job in hops:
        assert rows[job].state == JobState.DONE and finished_once(env, job), job
    # both managed partitions at once, and nothing planned on the node of the other
    assert set().union(*partitions.values()) == set(MANAGED), partitions
    assert planned_nodes and "k80n1" not in planned_nodes, planned_nodes
    # the k80 jobs: never adopted, held, requeued or named, and said why
    assert held not in rows and ran not in rows
    assert set(refused) == {held, ran}, refused
    assert all("k80" in why for why in refused.values()), refused
    assert not [argv for argv in env.runner.calls if names_any(argv, [held, ran])]
    assert seen_held and all(s == ("PENDING", True, "JobHeldUser") for s in seen_held), seen_held
    runs = env.port.runs([ran])
    assert [(r.state, r.job_id) for r in runs] == [("COMPLETED", ran)], runs
    assert slurm_states(env)[held][:2] == ("PENDING", True)
    subprocess.run(["scancel", str(held)], capture_output=True, timeout=20, check=False)
