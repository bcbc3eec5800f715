"""Pure parts of the daemon: resuming pending intents, fair-share factors, plan -> actions."""

from __future__ import annotations

import math

import pytest
from tick_steps import observe_and_reconcile

from hopsd.core.fairshare import (
    MIN_FACTOR,
    FairShare,
    FairShareRule,
    Usage,
    apply_fair_share,
    fair_share,
    fairshare_factors,
)
from hopsd.core.model import Assignment, Configuration, Plan
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.daemon.assemble import assemble
from hopsd.daemon.decide import JobHandle, actions_from_plan, intent_chain
from hopsd.daemon.enact import Step
from hopsd.daemon.observe import observe
from hopsd.daemon.resume import resume_steps
from hopsd.daemon.tick import Tick
from hopsd.daemon.views import ObservedJob
from hopsd.ledger.jobs import active_jobs
from hopsd.ledger.models import IntentAction as A
from hopsd.slurm.tag import HopsTag


def step(i: int, action: A, restarts: int = 0, at: float = 100.0) -> Step:
    payload = {
        "slurm_id": 7,
        "kind": "x",
        "restarts": restarts,
        "partition": "p",
        "nodes": [["n1", 1]],
    }
    return Step(i, "7", action, payload, at)


def seen(state: str = "PENDING", held: bool = True, restarts: int = 0) -> dict[int, ObservedJob]:
    return {7: ObservedJob(7, "u", "a", state, held=held, restarts=restarts)}


def verdicts(plan) -> tuple[list[int], list[int], list[int]]:  # type: ignore[no-untyped-def]
    run = [s.intent_id for s in plan.to_run if s.intent_id not in plan.already_done]
    return run, sorted(plan.already_done), [s.intent_id for s, _ in plan.to_abandon]


def test_start_chain_cut_after_update_finishes_with_release_only():
    plan = resume_steps([step(2, A.RELEASE)], seen(), now=101, max_age_s=10)
    assert verdicts(plan) == ([2], [], [])


def test_start_chain_of_a_job_already_running_needs_nothing():
    pending = [step(1, A.UPDATE), step(2, A.RELEASE)]
    plan = resume_steps(pending, seen("RUNNING", held=False), now=101, max_age_s=10)
    assert verdicts(plan) == ([], [1, 2], [])


def test_move_chain_cut_before_requeue_redoes_everything_in_order():
    pending = [
        step(1, A.REQUEUE_HOLD, restarts=0),
        step(2, A.UPDATE),
        step(3, A.MAKE_ELIGIBLE),
        step(4, A.RELEASE),
    ]
    plan = resume_steps(pending, seen("RUNNING", held=False, restarts=0), now=101, max_age_s=10)
    assert verdicts(plan) == ([1, 2, 3, 4], [], [])


def test_requeue_that_already_happened_is_not_repeated():
    pending = [step(1, A.REQUEUE_HOLD, restarts=0), step(2, A.UPDATE), step(4, A.RELEASE)]
    # Slurm shows one more restart and the job held again: requeue happened
    plan = resume_steps(pending, seen("PENDING", held=True, restarts=1), now=101, max_age_s=10)
    assert verdicts(plan) == ([2, 4], [1], [])


def test_requeue_that_happened_and_restarted_elsewhere_is_not_repeated():
    pending = [step(1, A.REQUEUE_HOLD, restarts=0)]
    plan = resume_steps(pending, seen("RUNNING", held=False, restarts=1), now=101, max_age_s=10)
    assert verdicts(plan) == ([], [1], [])


def test_stale_chain_is_dropped_and_gone_jobs_are_dropped():
    pending = [step(1, A.UPDATE, at=0.0), step(2, A.RELEASE, at=0.0)]
    assert verdicts(resume_steps(pending, seen(), now=50, max_age_s=10)) == ([], [], [1, 2])
    assert verdicts(resume_steps(pending, {}, now=1, max_age_s=10)) == ([], [], [1, 2])
    finished = seen("COMPLETED", held=False)
    assert verdicts(resume_steps(pending, finished, now=1, max_age_s=10)) == ([], [], [1, 2])


def test_fairshare_factors_by_hand():
    # alice used 30, bob 10, equal shares: usage fractions 0.75 / 0.25 against 0.5 each
    f = fairshare_factors({"alice": 30.0, "bob": 10.0}, {}, ["alice", "bob"])
    assert f["alice"] == pytest.approx(2**-1.5) and f["bob"] == pytest.approx(2**-0.5)
    # bob holding 3 shares of 4: 0.25 / 0.75 -> 2 ** (-1/3)
    f = fairshare_factors({"alice": 30.0, "bob": 10.0}, {"bob": 3.0}, ["alice", "bob"])
    assert f["bob"] == pytest.approx(2 ** (-1 / 3)) and f["alice"] == pytest.approx(2**-3)
    # nobody used anything: everyone at factor 1
    assert fairshare_factors({}, {}, ["a", "b"]) == {"a": 1.0, "b": 1.0}


def test_multiplier_by_hand():
    # alice's 40 are one half-life old -> 20; bob's 10 are fresh: fractions 2/3 and 1/3
    users = {"alice": 40.0 * 0.5, "bob": 10.0}
    accounts = {"lab": sum(users.values())}

    def factors(owners: list[tuple[str, str]], weight: float) -> FairShare:
        return fair_share(users, accounts, owners, {}, weight)

    fs = factors([("alice", "lab"), ("bob", "lab")], 1.0)
    assert fs.users["alice"] == pytest.approx(2 ** (-(2 / 3) / 0.5))
    assert fs.users["bob"] == pytest.approx(2 ** (-(1 / 3) / 0.5))
    # one account holds all usage and all shares: factor 0.5, so its multiplier is 1
    assert fs.accounts["lab"] == pytest.approx(0.5)
    assert fs.multiplier("bob", "lab") == pytest.approx(2 * 2 ** (-2 / 3))
    zero = factors([("alice", "lab")], 0.0)
    assert zero.multiplier("alice", "lab") == 1.0
    half = factors([("alice", "lab")], 0.5)
    assert half.multiplier("alice", "lab") == pytest.approx(math.sqrt(2 * 2 ** (-4 / 3)))


def test_multiplier_of_an_owner_far_over_a_tiny_share_stays_positive():
    fs = FairShare({"alice": 0.0}, {"lab": 0.0}, 1.0)  # 2 ** -huge underflowed to 0
    assert fs.multiplier("alice", "lab") == MIN_FACTOR
    assert FairShare({"alice": 0.0}, {}, 0.0).multiplier("alice", "lab") == 1.0


def test_assembled_jobs_get_the_owner_factor_in_the_step_and_their_true_wait(
    config, port, sessions, clock
):
    alice = port.add_job(HopsTag((1,), 1e6), user="alice", account="lab")
    bob = port.add_job(HopsTag((1,), 1e6), user="bob", account="lab")
    tick = Tick(config, port, sessions, clock=clock)
    observe_and_reconcile(tick)
    clock.advance(30)
    observe_and_reconcile(tick)  # both waited 30 s
    # alice used everything: user factor 0.25, bob 1; the one account holds all: 0.5
    usage = Usage({"alice": 10.0, "bob": 0.0}, {"lab": 10.0})
    with sessions.begin() as s:
        rows = active_jobs(s)
        obs = observe(port, clock)
        store = InMemoryThroughputStore()
        snap = assemble(rows, obs, config, {}, store, clock()).snapshot
    assert [j.share_factor for j in snap.jobs] == [1.0, 1.0]  # the step's to set
    jobs = {j.id: j for j in apply_fair_share(snap.jobs, usage, FairShareRule({}, 1.0))}
    # alice (2 * 0.25) * (2 * 0.5) = 0.5, bob (2 * 1) * (2 * 0.5) = 2
    assert jobs[str(alice)].share_factor == pytest.approx(0.5)
    assert jobs[str(bob)].share_factor == pytest.approx(2.0)
    assert jobs[str(alice)].wait_time == jobs[str(bob)].wait_time == pytest.approx(30.0)
    pure = apply_fair_share(snap.jobs, usage, FairShareRule({}, 0.0))
    assert [j.share_factor for j in pure] == [1.0, 1.0]


def test_plan_becomes_ordered_intent_chains():
    cfg = Configuration.of("a100", {"fast1": 2})
    plan = Plan(
        start=(Assignment("1", cfg),),
        move=(Assignment("2", Configuration.of("k80", {"slow1": 1, "slow2": 1})),),
        preempt=("3", "unknown"),
    )
    handles = {
        "1": JobHandle(11, 0, False),
        "2": JobHandle(12, 1, False),
        "3": JobHandle(13, 0, False),
    }
    parts = {"fast1": "fast", "slow1": "slow", "slow2": "slow"}
    actions = actions_from_plan(plan, handles, parts)
    assert [(a.job_id, a.kind, a.partition) for a in actions] == [
        ("1", "start", "fast"),
        ("2", "move", "slow"),
        ("3", "preempt", ""),
    ]
    chains = [[r.action for r in intent_chain(a, "why")] for a in actions]
    assert chains == [
        [A.UPDATE, A.RELEASE],
        [A.REQUEUE_HOLD, A.UPDATE, A.MAKE_ELIGIBLE, A.RELEASE],
        [A.REQUEUE_HOLD],
    ]
    move_update = intent_chain(actions[1], "why")[1].payload
    assert move_update["nodes"] == [["slow1", 1], ["slow2", 1]]
    assert intent_chain(actions[1], "why")[0].payload["restarts"] == 1
