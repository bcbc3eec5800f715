"""A job whose Slurm facts cannot make a planner job sits the tick out; the others are planned."""

from __future__ import annotations

import dataclasses

from tick_steps import observe_and_reconcile

from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.daemon.assemble import assemble
from hopsd.daemon.observe import observe
from hopsd.daemon.problems import InputProblems
from hopsd.daemon.tick import Tick
from hopsd.ledger.jobs import active_jobs
from hopsd.slurm.tag import HopsTag


def test_a_time_limit_the_planner_refuses_costs_only_its_own_job(config, port, sessions, clock):
    good = port.add_job(HopsTag((1,), 1e6), user="alice")
    bad = port.add_job(HopsTag((1,), 1e6), user="bob")
    tick = Tick(config, port, sessions, clock=clock)
    observe_and_reconcile(tick)
    problems = InputProblems()
    with sessions.begin() as s:
        rows = active_jobs(s)
        obs = observe(port, clock)
        # a time limit of 0 s: the planner's Job refuses it (on old code, after the job was
        # built, outside the per-job guard: the whole assembly failed)
        jobs = tuple(
            dataclasses.replace(j, time_limit_s=0.0) if j.slurm_id == bad else j for j in obs.jobs
        )
        obs = dataclasses.replace(obs, jobs=jobs)
        built = assemble(rows, obs, config, {}, InMemoryThroughputStore(), clock(), problems.guard)
    assert [j.id for j in built.snapshot.jobs] == [str(good)]
    assert "time limit" in (problems.take(bad) or "")
    assert problems.take(good) is None
